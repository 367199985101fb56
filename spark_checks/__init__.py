"""spark_checks"""
