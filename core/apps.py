from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_roles(sender, **kwargs) -> None:
    # core.services imports the models, which cannot be imported while the app registry loads.
    from core.services import roles_sync

    roles_sync()


class CoreConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "core"

    def ready(self) -> None:
        # Groups and permissions exist after every migrate, like Django's own permissions. No
        # sender filter: permissions of apps migrated after core must be picked up too.
        post_migrate.connect(_sync_roles, dispatch_uid="core.roles_sync")
