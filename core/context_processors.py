from core.roles import is_admin, is_researcher


def roles(request):
    user = getattr(request, "user", None)
    if user is None:
        return {}
    return {"is_researcher": is_researcher(user), "is_admin": is_admin(user)}
