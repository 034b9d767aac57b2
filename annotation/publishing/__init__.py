"""Publishing studies to Argilla and bringing answers back: publish/reconcile, sync (with its pure
diff), Argilla webhooks, and annotators' own Argilla accounts. The Argilla REST client itself is
the adapter in ``annotation.argilla``."""
