"""Root pytest configuration: plugins shared by the tests of every app."""

pytest_plugins = ["tests.llm_fixtures", "tests.argilla_fixtures"]
