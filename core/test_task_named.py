from core.task_policy import task_named


def test_a_task_named_resolves_to_the_registered_task_without_importing_its_module_here():
    signature = task_named("corpora.run_dataset_import", 5, reclaim=True)
    assert signature.type.name == "corpora.run_dataset_import"
    assert (signature.args, signature.kwargs) == ((5,), {"reclaim": True})
