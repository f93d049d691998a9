"""Runnel streams as a PySpark data source and sink (arrives with the Spark issue)."""
