"""The runnel-avro plugin; it registers nothing yet."""
