"""Output shared by the study and baseline commands."""

from django.core.management.base import OutputWrapper

from annotation.argilla_services import PublishResult


def publish_report(stdout: OutputWrapper, result: PublishResult) -> None:
    """The published dataset, and the initial password of each Argilla account created now."""
    if result.dataset_id:
        stdout.write(f"Published {result.study} to Argilla dataset {result.dataset_id}: {result.records} records.")
    else:
        stdout.write(
            f"Published {result.study} to Argilla: {result.records} records in the annotators' own datasets "
            "(each holds only that annotator's batch)."
        )
    for username, password in result.new_accounts.items():
        stdout.write(f"New Argilla account {username}: initial password {password}")
