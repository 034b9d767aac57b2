from celery import shared_task

from datasets.services import dataset_import_job_run


@shared_task(name="datasets.run_dataset_import", acks_late=True, reject_on_worker_lost=True)
def run_dataset_import(job_id: int) -> None:
    dataset_import_job_run(job_id=job_id)
