from django.core.management.base import BaseCommand

from core.services import roles_sync


class Command(BaseCommand):
    help = "Create the annotator / researcher / admin groups and sync their permissions (idempotent)."

    def handle(self, *args, **options):
        roles_sync()
        self.stdout.write(self.style.SUCCESS("Roles synced: annotator, researcher, admin."))
