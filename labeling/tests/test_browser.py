"""A real browser: an admin logs in, sees the demo problems, and downloads the export."""

import io
import json
from pathlib import Path

from django.core.management import call_command

FIXTURES = Path(__file__).parent / "fixtures"


def test_admin_logs_in_sees_problems_and_downloads_export(live_server, browser, tmp_path):
    call_command("seed_demo", "--no-labels", stdout=io.StringIO())
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    page = browser.new_page(accept_downloads=True)

    page.goto(f"{live_server.url}/problems/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("admin-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/problems/")
    assert page.locator("tbody tr").count() >= 40

    page.get_by_role("link", name="Export labels").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download").click()
    target = tmp_path / "export.jsonl"
    download.value.save_as(target)
    exported = [json.loads(line) for line in target.read_text().splitlines()]
    expected = [json.loads(x) for x in (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()]
    assert exported == expected
