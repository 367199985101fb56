"""The catalogue of findings (package data): per model, ``index.json``, each finding's ITF
counterexample and its explanation; ``expectations.json``, the recorded verdicts."""
