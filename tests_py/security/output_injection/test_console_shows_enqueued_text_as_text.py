"""A tenant's job name, group, tenant id, SQL, error message and schedule name are its own text, shown to the
operator in the console: they must arrive as text, never as markup. mallory (a broker_enqueue login mapped to its
own tenant, strict tenancy on) enqueues jobs and a schedule whose every field is an HTML/script payload; the
operator signs in, lists them, opens the job (its fields, its workflow picture) and looks at the charts and the
schedules in a real browser: no payload becomes an element or runs, and each shows literally. The page draws SVG
of its own (the workflow, the charts): those hold only its own shapes and text, and their links stay in the page.
(The page builds its DOM with text nodes only, and its Content-Security-Policy allows no inline script.)"""
from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from conftest import connect
from console_browser import TOKEN, chromium, click, text_in, visible, wait
from job_checks import wait_until
from tenant_logins import tenant_logins

TENANT = "<svg/onload=window.__pwned='tenant'>"
NAME = "<img src=x onerror=\"window.__pwned='name'\">"
GROUP = "\"><iframe src=javascript:window.__pwned='group'>"
ERROR = "</script><script>window.__pwned='error'</script><img src=x onerror=window.__pwned='error2'>"
SQL = f"DO $x$ BEGIN RAISE EXCEPTION '%', $e${ERROR}$e$; END $x$"
SCHEDULE = "<img src=x onerror=\"window.__pwned='schedule'\">/../%2F"
MARKUP = "img, iframe, object, embed, math, base, form:not(#login):not(#filters)"
OWN_SVG = "#job-graph-box > svg#job-graph, #charts > figure > svg[id^='chart-']"
SVG_PARTS = "svg *:not(rect):not(text):not(title):not(a):not(line)"


@pytest.fixture
def mallory(db):
    with tenant_logins(db, {"mallory": TENANT}) as names:
        yield names["mallory"]


def test_enqueued_markup_is_shown_as_text_in_the_console(db, mallory, start, tmp_path):
    config = tmp_path / "broker.json"
    config.write_text('{"broker": {"console_token": "%s", "queue_depth_poll_sec": 0.2}}' % TOKEN)
    runner = start(db, extra=("--config", str(config)))  # the console reads as the runner's (superuser) login
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db, user=mallory, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant(%s)", (TENANT,))
        job = conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s, p_job_group => %s)",
                           (NAME, SQL, GROUP)).fetchone()[0]
        conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 1', p_depends_on_job_ids => ARRAY[%s]::bigint[], "
                     "p_depends_on_groups => ARRAY[%s])", (NAME + " 2", job, GROUP))
        conn.execute("SELECT broker.broker_add_schedule(%s, '0 3 1 1 *', 'SELECT 1', p_enabled => false)", (SCHEDULE,))
        conn.commit()
    with connect(db) as owner:
        wait_until(lambda: owner.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                         (job,)).fetchone()[0] == 3, what="mallory's job failed")

    with chromium(tmp_path) as browser:
        browser.get(runner.url("/"))
        visible(browser, "#token").send_keys(TOKEN)
        click(browser, "#sign-in")
        text_in(browser, "#mode", "actions enabled")
        text_in(browser, "#jobs", NAME)
        text_in(browser, "#queues", TENANT)
        click(browser, f"#jobs a[data-job='{job}']")
        text_in(browser, "#job-error", ERROR)
        text_in(browser, "#job-sql", SQL)
        text_in(browser, "#job-title", NAME)
        text_in(browser, "#job", GROUP)
        text_in(browser, "#job", NAME + " 2")  # waited on by
        wait(browser, lambda b: b.find_elements(By.ID, "retry-job"))
        text_in(browser, "#job-graph", f"{job} {NAME}"[:24])
        text_in(browser, "#job-graph", f"group {GROUP}"[:24])
        text_in(browser, "#charts", TENANT)
        visible(browser, "#filter-tenant").send_keys(TENANT)
        click(browser, "#apply-filters")
        text_in(browser, "#schedules", SCHEDULE)
        assert browser.execute_script("return window.__pwned") is None
        assert browser.find_elements(By.CSS_SELECTOR, MARKUP) == []
        svgs = browser.find_elements(By.TAG_NAME, "svg")
        assert len(svgs) == 2 and svgs == browser.find_elements(By.CSS_SELECTOR, "svg:is(" + OWN_SVG + ")")
        assert browser.find_elements(By.CSS_SELECTOR, SVG_PARTS) == []
        links = browser.execute_script("return [...document.querySelectorAll('svg a')].map(a => a.getAttribute('href'))")
        assert links and all(link.startswith("#") for link in links), links   # within the page, never javascript:
        assert len(browser.find_elements(By.TAG_NAME, "script")) == 1  # the page's own console.js
