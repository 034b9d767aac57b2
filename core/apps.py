from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate, post_save, pre_save


def _sync_roles(sender, **kwargs) -> None:
    # core.services imports the models, which cannot be imported while the app registry loads.
    from core.services import roles_sync

    roles_sync()


def _note_password_change(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    instance._shiftlab_password_changed = False
    if raw or instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return  # e.g. the last_login update of every log-in: no query
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    instance._shiftlab_password_changed = stored is not None and stored != instance.password


def _revoke_tokens_on_password_change(sender, instance, raw=False, **kwargs) -> None:
    if not raw and getattr(instance, "_shiftlab_password_changed", False):
        from core.services import api_tokens_revoke

        instance._shiftlab_password_changed = False
        api_tokens_revoke(user=instance)


class CoreConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "core"

    def ready(self) -> None:
        # Groups and permissions exist after every migrate, like Django's own permissions. No
        # sender filter: permissions of apps migrated after core must be picked up too.
        post_migrate.connect(_sync_roles, dispatch_uid="core.roles_sync")
        # A new password ends the user's API tokens, whichever path saved it (the password change
        # and reset pages, the admin site, `changepassword`, `seed_demo --password`): a signal is
        # the one place all of them pass, unlike the project's own services.
        user_model = settings.AUTH_USER_MODEL
        pre_save.connect(_note_password_change, sender=user_model, dispatch_uid="core.password_change_seen")
        post_save.connect(_revoke_tokens_on_password_change, sender=user_model, dispatch_uid="core.tokens_revoke")
