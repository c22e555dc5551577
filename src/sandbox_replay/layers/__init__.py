"""Layer validators: each takes the loaded run and returns its findings and counts."""
