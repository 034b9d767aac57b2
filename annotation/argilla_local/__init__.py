"""A real Argilla server for a single machine, without Elasticsearch.

The modules in this package run only inside the separate ``.venv-argilla`` virtualenv (argilla-server
pins libraries that clash with Shiftlab's own): they import ``argilla_server`` and never Django or
anything else from the Shiftlab environment. Django starts them as a child process
(``manage.py argilla_server``); see ``docs/argilla.md``.
"""
