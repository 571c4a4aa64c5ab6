"""Where an alert goes: Airflow notifiers, run as the ``alert`` task's ``on_success_callback`` in the Airflow
worker, once the task has composed the alert (its return value: title, text and the report file's path).

The default, ``ReportFileNotifier``, writes the alert to the run's report file and the task log. Any other
notifier takes the alert through the templates below, with the user's own connection, e.g.::

    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    SmtpNotifier(to="ops@example.com", subject=ALERT_TITLE, html_content=ALERT_HTML)
    from airflow.providers.slack.notifications.slack import SlackNotifier
    SlackNotifier(slack_conn_id="slack_api_default", channel="#rocketmq", text=ALERT_TEXT)
"""
from __future__ import annotations

from pathlib import Path

from airflow.sdk import BaseNotifier

_ALERT = "ti.xcom_pull(task_ids='alert')"
ALERT_TITLE = "{{ %s['title'] }}" % _ALERT
ALERT_TEXT = "{{ %s['text'] }}" % _ALERT
ALERT_HTML = "<pre>{{ %s['text'] | e }}</pre>" % _ALERT
ALERT_REPORT = "{{ %s['report'] }}" % _ALERT


class ReportFileNotifier(BaseNotifier):
    """Writes the alert to a file (made anew) and to the task log, as a warning."""

    template_fields = ("path", "text")

    def __init__(self, path: str = ALERT_REPORT, text: str = ALERT_TEXT):
        super().__init__()
        self.path, self.text = path, text

    def notify(self, context) -> None:
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text if self.text.endswith("\n") else self.text + "\n")
        self.log.warning("%s\n(written to %s)", self.text, path)
