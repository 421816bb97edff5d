"""The Spark driver's class data sharing archive (tools/jvm_archive, built by `make setup`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.spark import jvm_archive
from tools.jvm_archive.__main__ import training_java_options

ROOT = Path(__file__).resolve().parents[2]

# A driver started from the profile, with -Xshare:on: a JVM that cannot map the archive
# (missing, or made by another Java build or for other jars) refuses to start instead of
# starting without it.
START_WITH_ARCHIVE_REQUIRED = """
from core.spark import get_session, profile_spark_settings
options = profile_spark_settings("local")["spark.driver.extraJavaOptions"] + " -Xshare:on"
spark = get_session("local", {"spark.driver.extraJavaOptions": options})
print("rows", spark.range(3).count())
"""


def test_a_driver_starts_from_the_archive_setup_built(tmp_path: Path) -> None:
    env = {**os.environ, "CDC_LAKEHOUSE_DIR": str(tmp_path / "lakehouse")}
    done = subprocess.run([sys.executable, "-c", START_WITH_ARCHIVE_REQUIRED], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the driver did not start with {jvm_archive()}:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert "rows 3" in done.stdout


def test_the_training_run_writes_the_archive_instead_of_reading_one() -> None:
    options = training_java_options("-Da=b -XX:SharedArchiveFile=/x/old.jsa -Dc=d", Path("/y/new.jsa.partial"))
    assert options == "-Da=b -Dc=d -XX:ArchiveClassesAtExit=/y/new.jsa.partial -Xlog:cds=error"


def test_the_setup_log_of_the_training_run_is_clean() -> None:
    """`make setup`'s training run logs what it did, not a traceback of its JVM's exit nor
    a warning per class left out of the archive."""
    log = ROOT / "build" / "jvm-archive.log"
    assert log.is_file(), f"{log} is missing: `make setup` writes it when it builds the archive"
    text = log.read_text()
    assert "Traceback" not in text and "[warning][cds]" not in text, text[-3000:]
    assert "wrote " in text, text[-3000:]
