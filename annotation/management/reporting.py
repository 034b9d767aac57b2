"""Output shared by the study and baseline commands."""

from django.core.management.base import OutputWrapper

from annotation.studies.argilla_services import PublishResult


def publish_report(stdout: OutputWrapper, result: PublishResult) -> None:
    """The records published, and the Argilla accounts created now (whose password nobody is shown:
    each annotator sets their own on Shiftlab's My Argilla account page)."""
    stdout.write(
        f"Published {result.study} to Argilla: {result.records} records in the annotators' own datasets "
        "(each holds only that annotator's batch)."
    )
    new_accounts_report(stdout, result.new_accounts)


def new_accounts_report(stdout: OutputWrapper, usernames) -> None:
    for username in usernames:
        stdout.write(
            f"New Argilla account {username}: they set its password themselves on Shiftlab's My Argilla account "
            "page (/annotation/me/argilla/), signed in as themselves."
        )
