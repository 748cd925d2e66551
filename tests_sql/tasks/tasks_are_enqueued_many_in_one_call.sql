-- broker_add_jobs takes tasks ({"task": name, "args": value, ...}) beside SQL jobs, with the keys that apply to a
-- task (priority, dependencies, idempotency keys, attempts, ...): each is what broker_add_task would have made.
-- A task element with a key only SQL jobs have, or a name that is not a string, is refused naming the element.
BEGIN;
SELECT plan(15);

CREATE ROLE broker_test_many_tasks NOLOGIN IN ROLE broker_enqueue;
GRANT broker_test_many_tasks TO CURRENT_USER;
SET LOCAL ROLE broker_test_many_tasks;
CREATE TEMP TABLE added AS SELECT * FROM broker.broker_add_jobs($$[
    {"job_name": "extract", "execute_str": "SELECT 1", "job_group": "extract"},
    {"task": "send_email", "args": {"to": "ada"}, "job_priority": 5, "max_attempts": 3, "depends_on_groups": ["extract"]},
    {"task": "send_email", "args": {"to": "bob"}, "idempotency_key": "mail-bob"},
    {"task": "send_email", "args": {"to": "bob again"}, "idempotency_key": "mail-bob"},
    {"task": "resize"}
]$$);
RESET ROLE;

SELECT is((SELECT array_agg(is_new ORDER BY ord) FROM added), ARRAY[true, true, true, false, true],
          'five elements, four new: the repeated idempotency key returns the first one''s task');
SELECT is((SELECT count(DISTINCT job_id) FROM added), 4::bigint, 'four jobs');
SELECT results_eq($$SELECT j.job_name, j.job_language, j.execute_str::jsonb, j.job_queue = q.job_queue, j.max_attempts,
                           j.job_priority, j.pending_deps
                      FROM added AS a JOIN broker.broker_jobs AS j USING (job_id)
                      LEFT JOIN broker.broker_task_queue AS q ON q.task_name = j.job_name
                     WHERE a.ord IN (2, 3, 5) ORDER BY a.ord$$,
                  $$VALUES ('send_email'::text, 'task'::text, '{"to": "ada"}'::jsonb, true, 3, 5, 1),
                           ('send_email', 'task', '{"to": "bob"}', true, 1, 0, 0),
                           ('resize', 'task', '{}', true, 1, 0, 0)$$,
                  'each a task row: its name, arguments (default {}), its name''s queue, its options, its dependency');
SELECT is((SELECT enqueued_by FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM added WHERE ord = 2)),
          'broker_test_many_tasks'::name, 'enqueued by the caller, under the policies');
SELECT is((SELECT array_agg(args ->> 'to') FROM broker.broker_claim_tasks(ARRAY['send_email'], 10)), ARRAY['bob'],
          'the ready one is claimed by name; the one waiting on the extract group is not');
SELECT is(r.complete_status, 2::smallint, 'the SQL job of the same call runs')
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
SELECT is((SELECT array_agg(args ->> 'to') FROM broker.broker_claim_tasks(ARRAY['send_email'], 10)), ARRAY['ada'],
          'then the task that waited on it');

-- tasks alone, no key the plain path does not take: one INSERT straight from the elements
SET LOCAL ROLE broker_test_many_tasks;
SELECT broker.broker_add_jobs('[{"task": "plain", "args": [1]}, {"task": "plain", "args": [2], "max_attempts": 2}]');
RESET ROLE;
SELECT results_eq($$SELECT args, max_attempts FROM broker.broker_claim_tasks(ARRAY['plain'], 10) ORDER BY job_id$$,
                  $$VALUES ('[1]'::jsonb, 1), ('[2]', 2)$$, 'tasks alone take the plain path, as tasks');

SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "a", "execute_str": "SELECT 1"}, {"task": "t", "execute_str": "SELECT 1"}]')$$,
                 '22023', 'broker_add_jobs: element 2: a task (key task) takes no execute_str', 'a task with SQL: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"task": "t", "job_queue": 3, "run_as": "x"}]')$$,
                 '22023', 'broker_add_jobs: element 1: a task (key task) takes no job_queue, run_as', 'a task with a queue number and a run_as: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"task": 7}]')$$,
                 '22023', 'broker_add_jobs: element 1: task must be a JSON string (the task name), got a JSON number', 'a name that is not a string: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"task": "ok"}, {"task": "  "}]')$$,
                 '22023', 'broker_add_jobs: element 2: task must be 1 to 200 characters and not blank', 'a blank name: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"task": "ok", "args": {}, "job_priority": "high"}]')$$,
                 '22023', NULL, 'a task''s other keys are checked as a job''s');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"task": "ok", "args": {}, "color": "red"}]')$$,
                 '22023', NULL, 'an unknown key: 22023');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'ok'), 0::bigint, 'nothing of a refused call was written');

SELECT * FROM finish();
ROLLBACK;
