"""The console in a real browser (headless Chromium on loopback, Selenium, waits on page conditions): an operator
signs in with the token, filters, opens a failed job (a link: the URL keeps the filters and the job, and a reload
shows them again), sees the finished jobs charted, reads its SQL, attempts and workflow picture, pages through the jobs by id, cancels jobs by filter after a
confirmation, runs a schedule now and pauses it, clicks Retry and sees it (and
the job cancelled because of it) complete; a pending job says why it waits, and the tenants and limits panel shows
each tenant's part of its queues and the limits. The console logs in as the tenant's own login, so another tenant's
jobs never show. Without a token configured it is read-only: actions are refused (403) and job SQL is not sent;
with one, a request without it is refused (401) and CSRF-shaped requests too.

`make screenshot` runs the first test with PGBROKER_TEST_SCREENSHOT_DIR set: docs/img/console.png."""
from __future__ import annotations

import os

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select

from conftest import connect
from console_browser import TOKEN, chromium, click, config_file, request, text_in, visible, wait
from job_checks import wait_until
from tenant_logins import enqueue_as, tenant_logins

FIXABLE = "SELECT 1 / (SELECT count(*) FROM public.console_fix)::int"


def status(db: str, job_id: int) -> int:
    with connect(db) as owner:
        return owner.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job_id,)).fetchone()[0]


@pytest.fixture
def tenants(db):
    with tenant_logins(db, {"acme": "acme", "other": "other"}) as names:
        with connect(db) as owner:
            owner.execute("CREATE TABLE public.console_fix (x int)")
            owner.execute(f'GRANT SELECT ON public.console_fix TO "{names["acme"]}"')
        yield names


def failed_dag(db: str, names: dict) -> tuple[int, int]:
    """acme's job that fails until console_fix has a row, and one that waits on it (cancelled when it fails)."""
    enqueue_as(db, names["acme"], "acme", "nightly import", "SELECT 1")
    with connect(db, user=names["acme"], autocommit=False) as conn:  # one transaction: the edge before any claim
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        broken = conn.execute("SELECT job_id FROM broker.broker_add_job('broken report', %s)", (FIXABLE,)).fetchone()[0]
        after = conn.execute("SELECT job_id FROM broker.broker_add_job('mail the report', 'SELECT 2', "
                             "p_depends_on_job_ids => ARRAY[%s]::bigint[])", (broken,)).fetchone()[0]
        conn.commit()
    enqueue_as(db, names["other"], "other", "other tenant's payroll", "SELECT 3")
    wait_until(lambda: status(db, broken) == 3 and status(db, after) == 4, what="the failure and its cancelled dependent")
    return broken, after


def test_an_operator_signs_in_filters_and_retries_a_failed_job(db, tenants, start, tmp_path):
    # two console accounts: what each does is signed with its name
    config = config_file(tmp_path / "broker.json", db, tenants["runner"], tenants["acme"],
                         f"alice:{TOKEN},bob:{TOKEN[::-1]}")
    runner = start(user=tenants["runner"], extra=("--config", str(config)))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    broken, after = failed_dag(db, tenants)
    with connect(db) as owner:
        owner.execute("SELECT broker.broker_set_limit('crm', 2, NULL, p_all_tenants => true)")
    with connect(db, user=tenants["acme"], autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        later = conn.execute("SELECT job_id FROM broker.broker_add_job('next month', 'SELECT 4', p_job_queue => 2, "
                             "p_run_after => now() + interval '30 days')").fetchone()[0]
        conn.commit()

    # over HTTP: without the token, with a wrong one, and CSRF-shaped requests are refused
    retry = runner.url(f"/api/jobs/{broken}/retry")
    body = {"database": db, "tenant": "acme"}
    assert request(retry, "POST", body)[0] == 401
    assert request(retry, "POST", body, {"Authorization": "Bearer " + TOKEN[:-1] + "x"})[0] == 401
    assert request(retry, "POST", body, {"Authorization": "Bearer " + TOKEN, "Origin": "http://evil.example"})[0] == 403
    assert request(retry, "POST", body, {"Authorization": "Bearer " + TOKEN, "Content-Type": "text/plain"})[0] == 415
    assert request(retry, "GET")[0] == 404
    code, detail = request(runner.url(f"/api/jobs/{broken}?tenant=acme"))
    assert code == 200 and detail["sql_shown"] is False and detail["job"]["execute_str"] is None
    assert status(db, broken) == 3

    with chromium(tmp_path) as browser:
        browser.get(runner.url("/"))
        visible(browser, "#login")
        text_in(browser, "#jobs", "broken report")
        assert "other tenant's payroll" not in browser.find_element(By.ID, "jobs").text  # the database's tenancy
        # the charts: acme's queue 1 finished a job and failed one in the last minutes
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-1-acme rect[data-state='failed']")
             and b.find_elements(By.CSS_SELECTOR, "#chart-1-acme rect[data-state='completed']"))
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        click(browser, "#sign-in")
        text_in(browser, "#mode", "actions enabled")
        text_in(browser, "#signed-in", "signed in as alice")
        click(browser, f"#jobs a[data-job='{broken}']")
        visible(browser, "#retry-job")
        text_in(browser, "#job-sql", "public.console_fix")
        screenshot(browser)

        click(browser, "#pause-1-acme")  # acme's own jobs of queue 1
        wait(browser, lambda b: "paused" in b.find_element(By.ID, "queues").text)
        assert paused(db) == [(1, "acme")]
        click(browser, "#resume-1-acme")
        wait(browser, lambda b: "paused" not in b.find_element(By.ID, "queues").text)
        assert paused(db) == []

        Select(browser.find_element(By.ID, "filter-state")).select_by_visible_text("failed")
        browser.find_element(By.ID, "filter-tenant").send_keys("acme")
        Select(browser.find_element(By.ID, "filter-finished_within")).select_by_visible_text("in the last hour")
        click(browser, "#apply-filters")
        wait(browser, lambda b: "nightly import" not in b.find_element(By.ID, "jobs").text
             and "broken report" in b.find_element(By.ID, "jobs").text)

        click(browser, f"#jobs a[data-job='{broken}']")
        text_in(browser, "#job-sql", "public.console_fix")
        # what is shown is a link: the filters and the job are in the URL, and a reload shows them again
        wait(browser, lambda b: f"job={broken}" in b.current_url and "state=failed" in b.current_url
             and "tenant=acme" in b.current_url and "finished_within=1h" in b.current_url)
        browser.refresh()
        text_in(browser, "#job-sql", "public.console_fix")
        assert browser.find_element(By.ID, "filter-tenant").get_attribute("value") == "acme"
        text_in(browser, "#jobs-count", "1 job match")
        # its workflow: the job that waits on it, a link in the picture
        visible(browser, f"#graph-job-{broken}")
        click(browser, f"#graph-job-{after}")
        text_in(browser, "#job-title", f"Job {after}")
        browser.back()
        text_in(browser, "#job-title", f"Job {broken}")
        text_in(browser, "#job", "division by zero")
        text_in(browser, "#job", "mail the report")  # waited on by
        with connect(db) as owner:
            owner.execute("INSERT INTO public.console_fix VALUES (1)")
        click(browser, "#retry-job")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#job dd [data-state='completed']"), timeout=60)
        text_in(browser, "#job-output", "SELECT 1")
        wait_until(lambda: status(db, after) == 2, what="the dependent ran after the retry")

        Select(browser.find_element(By.ID, "filter-state")).select_by_visible_text("any")
        Select(browser.find_element(By.ID, "filter-finished_within")).select_by_visible_text("any time")
        click(browser, "#apply-filters")
        text_in(browser, "#jobs", "mail the report")
        wait(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, "#jobs [data-state='failed']"))

        click(browser, f"#jobs a[data-job='{later}']")  # a pending job: why it waits, and Cancel
        text_in(browser, "#job-waiting", "due at")
        text_in(browser, "#flow", "(all tenants)")  # the tenants and limits panel: the limit across tenants
        assert "acme" in browser.find_element(By.ID, "flow").text  # and acme's part of queue 1
        click(browser, "#cancel-job")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#job dd [data-state='cancelled']"))
        text_in(browser, "#job", "cancelled from the console by alice")

        # the schedules panel: acme's schedule with Run now, Pause and Resume
        with connect(db, user=tenants["acme"]) as conn:
            conn.execute("SELECT broker.broker_set_tenant('acme'); SELECT broker.broker_add_schedule("
                         "'console nightly', '0 3 * * *', 'SELECT 5', p_time_zone => 'Europe/Paris')")
        text_in(browser, "#schedules", "console nightly")
        text_in(browser, "#schedules", "Europe/Paris")
        click(browser, "#run-now-console_20nightly")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#schedules a[data-job]"))
        ran = int(browser.find_element(By.CSS_SELECTOR, "#schedules a[data-job]").get_attribute("data-job"))
        wait_until(lambda: status(db, ran) == 2, what="the schedule's job run now")
        click(browser, "#pause-schedule-console_20nightly")
        wait(browser, lambda b: "paused" in b.find_element(By.ID, "schedules").text)
        click(browser, "#resume-schedule-console_20nightly")
        wait(browser, lambda b: "paused" not in b.find_element(By.ID, "schedules").text)

        # paging by id: 55 matching jobs, 50 a page; Older, then back to the newest with the browser's Back
        with connect(db, user=tenants["acme"]) as conn:
            conn.execute("SELECT broker.broker_set_tenant('acme'); "
                         "SELECT broker.broker_add_job('bulk ' || g, 'SELECT 1', p_job_queue => 3) FROM generate_series(1, 55) AS g")
        browser.find_element(By.ID, "filter-name").send_keys("bulk")
        click(browser, "#apply-filters")
        text_in(browser, "#jobs-count", "55 jobs match")
        click(browser, "#jobs-older")
        text_in(browser, "#jobs-page", "below job")
        wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#jobs tr")) == 6)  # the header and the 5 oldest
        browser.back()
        wait(browser, lambda b: not b.find_elements(By.ID, "jobs-page")
             and len(b.find_elements(By.CSS_SELECTOR, "#jobs tr")) == 51)

        # a bulk cancel by filter: the confirmation names the count and a sample; the reason is in each job's history
        with connect(db, user=tenants["acme"]) as conn:
            conn.execute("SELECT broker.broker_set_tenant('acme'); SELECT broker.broker_add_job('later batch ' || g, 'SELECT 1', "
                         "p_run_after => now() + interval '30 days') FROM generate_series(1, 3) AS g")
        Select(browser.find_element(By.ID, "filter-state")).select_by_visible_text("pending")
        browser.find_element(By.ID, "filter-name").clear()
        browser.find_element(By.ID, "filter-name").send_keys("later batch")
        click(browser, "#apply-filters")
        text_in(browser, "#jobs-count", "3 jobs match")
        click(browser, "#bulk-cancel")
        alert = wait(browser, expected_conditions.alert_is_present())
        assert "Cancel all 3 jobs" in alert.text and "later batch 3" in alert.text
        alert.accept()
        wait(browser, lambda b: "0 jobs match" in b.find_element(By.ID, "jobs-count").text)
        with connect(db) as owner:
            reasons = owner.execute("SELECT DISTINCT cancel_reason FROM broker.broker_jobs WHERE job_name LIKE 'later batch %'").fetchall()
        assert reasons == [("bulk cancel from the console by alice (3 jobs: state=pending, tenant=acme, name=later batch)",)]
    assert status(db, later) == 4


def screenshot(browser) -> None:
    """`make screenshot` sets PGBROKER_TEST_SCREENSHOT_DIR: the console with a failed job open, for the docs."""
    docs = os.environ.get("PGBROKER_TEST_SCREENSHOT_DIR")
    if docs:
        os.makedirs(os.path.join(docs, "img"), exist_ok=True)
        assert browser.save_screenshot(os.path.join(docs, "img", "console.png"))


def paused(db: str) -> list[tuple]:
    with connect(db) as owner:
        return owner.execute("SELECT job_queue, tenant_id FROM broker.broker_queue_pause ORDER BY 1, 2").fetchall()


def test_without_a_token_the_console_is_read_only_and_hides_job_sql(db, tenants, start, tmp_path):
    config = config_file(tmp_path / "broker.json", db, tenants["runner"], tenants["acme"], None)
    runner = start(user=tenants["runner"], extra=("--config", str(config)))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    broken, _ = failed_dag(db, tenants)
    for path in (f"/api/jobs/{broken}/retry", f"/api/jobs/{broken}/cancel", "/api/queues/1/pause"):
        assert request(runner.url(path), "POST", {"database": db, "tenant": "acme"})[0] == 403
        assert request(runner.url(path), "POST", {"database": db, "tenant": "acme"},
                       {"Authorization": "Bearer " + TOKEN})[0] in (401, 403)
    code, detail = request(runner.url(f"/api/jobs/{broken}?tenant=acme"))
    assert code == 200 and detail["job"]["execute_str"] is None and "console_fix" not in str(detail)

    with chromium(tmp_path) as browser:
        browser.get(runner.url("/"))
        text_in(browser, "#mode", "read-only: no console token configured")
        assert not browser.find_element(By.ID, "login").is_displayed()
        click(browser, f"#jobs a[data-job='{broken}']")
        text_in(browser, "#job", "division by zero")
        visible(browser, "#job-sql-hidden")
        assert "console_fix" not in browser.find_element(By.TAG_NAME, "body").text
        assert not browser.find_elements(By.ID, "retry-job") and not browser.find_elements(By.CSS_SELECTOR, "#queues button")
    assert status(db, broken) == 3
