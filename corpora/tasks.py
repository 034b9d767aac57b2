from celery import shared_task

from corpora.services import dataset_import_job_run


@shared_task(name="corpora.run_dataset_import", bind=True, acks_late=True, reject_on_worker_lost=True)
def run_dataset_import(self, job_id: int) -> None:
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    dataset_import_job_run(job_id=job_id, redelivered=redelivered)
