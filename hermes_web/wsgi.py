import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
application = get_wsgi_application()

from hermes_web.tempdirs import start_process  # noqa: E402 (needs the configured Django above)
from hermes_web.warmup import warm  # noqa: E402

start_process()  # uploads and unpacked imports in a folder a sweep can clear if we are killed
warm()
