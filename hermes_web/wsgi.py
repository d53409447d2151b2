import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
application = get_wsgi_application()

from hermes_web.warmup import warm  # noqa: E402 (needs the configured Django above)

warm()
