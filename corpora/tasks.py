from celery import shared_task

from core.sweeper import StuckJobKind, stuck_job_kind_register
from corpora.models import DatasetImport
from corpora.services import dataset_import_job_dispatch, dataset_import_job_fail, dataset_import_job_run


@shared_task(name="corpora.run_dataset_import", bind=True, acks_late=True, reject_on_worker_lost=True)
def run_dataset_import(self, job_id: int, reclaim: bool = False) -> None:
    """Run an import job. ``reclaim`` (sent by the stuck-job sweeper) counts as a redelivery: the
    job may be left "running" by a worker that died."""
    redelivered = reclaim or bool((self.request.delivery_info or {}).get("redelivered"))
    dataset_import_job_run(job_id=job_id, redelivered=redelivered)


stuck_job_kind_register(
    StuckJobKind(
        label="dataset import",
        model=DatasetImport,
        task_names=frozenset({"corpora.run_dataset_import"}),
        resume=lambda job: dataset_import_job_dispatch(
            job_id=job.pk, reclaim=job.status == DatasetImport.Status.RUNNING
        ),
        fail=lambda job_id, reason: dataset_import_job_fail(job_id=job_id, reason=reason),
    )
)
