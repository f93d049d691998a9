"""Avro serialization for Runnel (arrives with the codecs issue)."""
