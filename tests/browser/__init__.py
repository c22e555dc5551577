"""Browser tests: the built report site opened in Chromium, the way a reviewer opens it."""
