"""Importers: turn another harness's logs into bundle folders the replay reads."""
