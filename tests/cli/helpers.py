"""The one way the CLI tests run ``rocketstore``: in-process through click's runner (the real commands, no
JVM). An exception the CLI does not turn into an exit status fails the test with its traceback (rather than
showing as exit 1); ``stdout`` and ``stderr`` come apart, ``output`` holds both."""
from __future__ import annotations

from click.testing import CliRunner, Result

from rocketstore_spark.cli.main import cli


def run(*argv) -> Result:
    """``rocketstore ARGV...`` (each argument passed through ``str``)."""
    return CliRunner().invoke(cli, [str(a) for a in argv], catch_exceptions=False)
