"""Session-wide test setup: the real services (PostgreSQL, OpenSearch, Elasticsearch) start once per session."""
pytest_plugins = ["tests.support.fixtures"]
