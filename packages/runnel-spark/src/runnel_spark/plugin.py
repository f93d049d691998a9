"""The runnel-spark plugin; it registers nothing yet."""
