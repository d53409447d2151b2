"""The signed-in user and API keys, read from the cache on every request instead of the
database."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from hermes_web.caching import API_KEY_SECONDS, USER_SECONDS, api_key_key, user_key
from hermes_web.limits import count_login_failure
from hermes_web.models import ApiKey

# "Last used" is shown to the minute: writing it on every request would make every call of
# one key queue on that key's row lock.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class CachedUserBackend(ModelBackend):
    """``ModelBackend`` whose ``get_user`` (run by every request of a signed-in user) is served
    from the cache: one query less per page, and the same user row for every web process.

    Every save or delete of a user drops its entry (``forget_user``), so a password change,
    a deactivation or a deletion applies on the next request; an entry lives at most
    ``caching.USER_SECONDS`` in case a bulk ``update()`` bypassed the signals.
    """

    def get_user(self, user_id):
        user = cache.get(user_key(user_id))
        if user is None:
            user = super().get_user(user_id)  # None for a missing or inactive user
            if user is not None:
                cache.set(user_key(user_id), user, USER_SECONDS)
            return user
        return user if self.user_can_authenticate(user) else None


def forget_user(sender, instance, **kwargs) -> None:
    """Drop a user's cached row (connected to the user model's post_save and post_delete)."""
    cache.delete(user_key(instance.pk))


def authenticate_api_key(raw_key: str) -> ApiKey | None:
    """The usable key for a bearer token, its ``owner`` set to the (active) user, or None.

    Both rows come from the cache when they can (an API call then costs no query for its
    authentication); a revocation or any other save or delete of the key drops the entry
    (``forget_api_key``; only usable keys are ever cached), and the owner goes through
    ``CachedUserBackend``, so a deactivated user's keys stop working on the next request.
    """
    key_hash = ApiKey.hash(raw_key)
    key = cache.get(api_key_key(key_hash))
    if key is None:
        key = ApiKey.objects.usable().filter(key_hash=key_hash).first()
        if key is None:
            return None
        cache.set(api_key_key(key_hash), key, API_KEY_SECONDS)
    owner = CachedUserBackend().get_user(key.owner_id)
    if owner is None:
        return None
    key.owner = owner
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
        cache.set(api_key_key(key_hash), key, API_KEY_SECONDS)
    return key


def forget_api_key(sender, instance, **kwargs) -> None:
    """Drop a key's cached row (connected to ``ApiKey``'s post_save and post_delete)."""
    cache.delete(api_key_key(instance.key_hash))


def connect_signals() -> None:
    user_model = get_user_model()
    post_save.connect(forget_user, sender=user_model, dispatch_uid="hermes-forget-user-save")
    post_delete.connect(forget_user, sender=user_model, dispatch_uid="hermes-forget-user-delete")
    post_save.connect(forget_api_key, sender=ApiKey, dispatch_uid="hermes-forget-key-save")
    post_delete.connect(forget_api_key, sender=ApiKey, dispatch_uid="hermes-forget-key-delete")
    user_login_failed.connect(count_login_failure, dispatch_uid="hermes-login-failures")
