"""Studies, one part (issue 43: these were three sub-packages, studies, quality and publishing, whose
services imported each other and could not be ordered): creating and locking a study (its design,
control items and sampling stored), assigning items to annotators; the quality services (control
checks, validation, adaptive stopping, the gate, the LLM judges' population scores); publishing to
Argilla and bringing the answers back (publish/reconcile, sync with its pure diff, webhooks,
annotators' Argilla accounts). The pure science these run lives below, in ``annotation.science``;
the Argilla REST client is the adapter in ``annotation.argilla``."""
