"""The report's index.html opened in a real headless browser (Debian's chromium, installed by
scripts/setup.sh): no console error, every image decoded, and a screenshot to look at.

How: a checker page loads index.html in an iframe (file:// access allowed between the two) and,
when it has loaded, writes each image's decoded size into its own DOM, which ``--dump-dom``
prints; console messages of either page reach stderr through ``--enable-logging=stderr``.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

CHECKER = """<!doctype html><html><body>
<iframe id="page" src="{page}" style="width:1200px;height:3000px"></iframe>
<pre id="result">not loaded</pre>
<script>
document.getElementById('page').addEventListener('load', function () {{
  var out = [];
  try {{
    var images = Array.from(this.contentDocument.images);
    out.push('images ' + images.length);
    images.forEach(function (im) {{
      out.push('image ' + im.getAttribute('src') + ' ' + (im.complete ? 'complete' : 'pending') + ' ' +
               im.naturalWidth + 'x' + im.naturalHeight);
    }});
  }} catch (e) {{ out.push('checker error ' + e); }}
  document.getElementById('result').textContent = out.join('\\n');
}});
</script></body></html>
"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh (apt-get install -y chromium)")
    return found


def _browser(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def open_in_browser(page, tmp_path) -> tuple[list[str], list[tuple[str, bool, int, int]]]:
    """Console messages of ``page`` and its images as ``(src, complete, width, height)``."""
    checker = tmp_path / "checker.html"
    checker.write_text(CHECKER.format(page=page.resolve().as_uri()))
    proc = _browser("--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom",
                    checker.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, flags=re.DOTALL)
    assert found, proc.stdout[-2000:]
    lines = found.group(1).strip().splitlines()
    assert lines and lines[0].startswith("images "), lines
    images = []
    for line in lines[1:]:
        src, state, size = line.split(" ")[1:]
        width, height = (int(v) for v in size.split("x"))
        images.append((src, state == "complete", width, height))
    assert len(images) == int(lines[0].split()[1])
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return console, images


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report_dir(single_study, tmp_path_factory):
    from accel_dse.cli import main

    url, _ = single_study
    out = tmp_path_factory.mktemp("browser") / "report"
    assert main(["report", "--storage", url, "--study", "s", "--out", str(out)]) == 0
    return out


def test_the_report_page_loads_without_console_errors_and_every_image_renders(report_dir, tmp_path):
    console, images = open_in_browser(report_dir / "index.html", tmp_path)
    assert console == []
    names = {src for src, *_ in images}
    assert names == {"pareto.png", "history.png", "breakdown.png", "roofline.png"}
    for src, complete, width, height in images:
        assert complete and (width, height) == _png_size(report_dir / src), src


def test_a_screenshot_of_the_report(report_dir, tmp_path):
    shot = tmp_path / "report.png"
    proc = _browser("--window-size=1280,2400", "--hide-scrollbars", f"--screenshot={shot}",
                    (report_dir / "index.html").as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _png_size(shot) == (1280, 2400)
    assert shot.stat().st_size > 50_000  # tables and figures drawn, not a blank page


def test_the_checker_sees_a_script_error_and_a_broken_image(tmp_path):
    """The checks above can fail: a page with an uncaught error and a missing image is caught."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "index.html").write_text("<html><body><img src='missing.png'><script>notDefined();</script></body></html>")
    console, images = open_in_browser(bad / "index.html", tmp_path)
    assert any("notDefined is not defined" in line for line in console)
    assert images == [("missing.png", True, 0, 0)]
