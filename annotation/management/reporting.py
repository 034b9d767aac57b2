"""Output shared by the study and baseline commands."""

from django.core.management.base import OutputWrapper

from annotation.publishing.argilla_services import PublishResult


def publish_report(stdout: OutputWrapper, result: PublishResult) -> None:
    """The published dataset, and the Argilla accounts created now (whose password nobody is shown:
    each annotator sets their own on Shiftlab's My Argilla account page)."""
    if result.dataset_id:
        stdout.write(f"Published {result.study} to Argilla dataset {result.dataset_id}: {result.records} records.")
    else:
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
