-- broker_cron_next across daylight-saving changes (ISC cron rules): New York, Berlin, Lord Howe (30-minute shift).
-- Expected values agree with tests_py/cron_reference.py (zoneinfo, minute by minute).
BEGIN;
SELECT plan(26);


-- America/New_York: spring forward (02:00 EST -> 03:00 EDT, 2025-03-09)
SELECT is(broker.broker_cron_next('30 2 * * *', '2025-03-09 05:00Z', 'America/New_York'), '2025-03-09 07:00Z'::timestamptz,
          '30 2 * * * after 2025-03-09 05:00Z: fixed 02:30, skipped: fires at 03:00 EDT, the first instant after the jump');
SELECT is(broker.broker_cron_next('30 2 * * *', '2025-03-09 07:00Z', 'America/New_York'), '2025-03-10 06:30Z'::timestamptz,
          '30 2 * * * after 2025-03-09 07:00Z: ... once: the next fire is the next days 02:30 EDT');
SELECT is(broker.broker_cron_next('0,30 2 * * *', '2025-03-09 05:00Z', 'America/New_York'), '2025-03-09 07:00Z'::timestamptz,
          '0,30 2 * * * after 2025-03-09 05:00Z: two skipped fixed times collapse into one fire at 03:00');
SELECT is(broker.broker_cron_next('0,30 2 * * *', '2025-03-09 07:00Z', 'America/New_York'), '2025-03-10 06:00Z'::timestamptz,
          '0,30 2 * * * after 2025-03-09 07:00Z: ... and not twice');
SELECT is(broker.broker_cron_next('30 * * * *', '2025-03-09 06:45Z', 'America/New_York'), '2025-03-09 07:30Z'::timestamptz,
          '30 * * * * after 2025-03-09 06:45Z: wildcard: no fire in the skipped hour (01:30 EST -> 03:30 EDT)');
SELECT is(broker.broker_cron_next('0 3 * * *', '2025-03-09 05:00Z', 'America/New_York'), '2025-03-09 07:00Z'::timestamptz,
          '0 3 * * * after 2025-03-09 05:00Z: 03:00 exists: an ordinary fire');

-- America/New_York: fall back (02:00 EDT -> 01:00 EST, 2025-11-02)
SELECT is(broker.broker_cron_next('30 1 * * *', '2025-11-02 04:00Z', 'America/New_York'), '2025-11-02 05:30Z'::timestamptz,
          '30 1 * * * after 2025-11-02 04:00Z: fixed 01:30: the first occurrence (EDT)');
SELECT is(broker.broker_cron_next('30 1 * * *', '2025-11-02 05:30Z', 'America/New_York'), '2025-11-03 06:30Z'::timestamptz,
          '30 1 * * * after 2025-11-02 05:30Z: fixed: not again at 01:30 EST');
SELECT is(broker.broker_cron_next('30 1 * * *', '2025-11-02 06:10Z', 'America/New_York'), '2025-11-03 06:30Z'::timestamptz,
          '30 1 * * * after 2025-11-02 06:10Z: fixed, asked from within the repeated hour: skips its second 01:30');
SELECT is(broker.broker_cron_next('30 * * * *', '2025-11-02 05:30Z', 'America/New_York'), '2025-11-02 06:30Z'::timestamptz,
          '30 * * * * after 2025-11-02 05:30Z: wildcard: 01:30 EST fires too');
SELECT is(broker.broker_cron_next('30 * * * *', '2025-11-02 06:10Z', 'America/New_York'), '2025-11-02 06:30Z'::timestamptz,
          '30 * * * * after 2025-11-02 06:10Z: wildcard, asked from within the repeated hour');
SELECT is(broker.broker_cron_next('30 1 2 11 *', '2025-01-01 00:00Z', 'America/New_York'), '2025-11-02 05:30Z'::timestamptz,
          '30 1 2 11 * after 2025-01-01 00:00Z: a yearly fixed time on the fold day, planned months ahead: first occurrence');

-- Europe/Berlin (CET/CEST, 2025-03-30 and 2025-10-26)
SELECT is(broker.broker_cron_next('30 2 * * *', '2025-03-29 23:00Z', 'Europe/Berlin'), '2025-03-30 01:00Z'::timestamptz,
          '30 2 * * * after 2025-03-29 23:00Z: fixed 02:30 skipped: 03:00 CEST');
SELECT is(broker.broker_cron_next('30 2 * * *', '2025-10-25 22:00Z', 'Europe/Berlin'), '2025-10-26 00:30Z'::timestamptz,
          '30 2 * * * after 2025-10-25 22:00Z: fixed 02:30: first occurrence (CEST)');
SELECT is(broker.broker_cron_next('30 2 * * *', '2025-10-26 00:30Z', 'Europe/Berlin'), '2025-10-27 01:30Z'::timestamptz,
          '30 2 * * * after 2025-10-26 00:30Z: fixed: not at 02:30 CET');
SELECT is(broker.broker_cron_next('*/30 2 * * *', '2025-10-25 23:59Z', 'Europe/Berlin'), '2025-10-26 00:00Z'::timestamptz,
          '*/30 2 * * * after 2025-10-25 23:59Z: wildcard 02:00 CEST');
SELECT is(broker.broker_cron_next('*/30 2 * * *', '2025-10-26 00:00Z', 'Europe/Berlin'), '2025-10-26 00:30Z'::timestamptz,
          '*/30 2 * * * after 2025-10-26 00:00Z: wildcard 02:30 CEST');
SELECT is(broker.broker_cron_next('*/30 2 * * *', '2025-10-26 00:30Z', 'Europe/Berlin'), '2025-10-26 01:00Z'::timestamptz,
          '*/30 2 * * * after 2025-10-26 00:30Z: wildcard 02:00 CET (again)');
SELECT is(broker.broker_cron_next('*/30 2 * * *', '2025-10-26 01:00Z', 'Europe/Berlin'), '2025-10-26 01:30Z'::timestamptz,
          '*/30 2 * * * after 2025-10-26 01:00Z: wildcard 02:30 CET (again)');

-- Australia/Lord_Howe: 30-minute shifts (+10:30/+11)
SELECT is(broker.broker_cron_next('15 2 * * *', '2025-10-04 12:00Z', 'Australia/Lord_Howe'), '2025-10-04 15:30Z'::timestamptz,
          '15 2 * * * after 2025-10-04 12:00Z: 02:00 -> 02:30: fixed 02:15 fires at 02:30');
SELECT is(broker.broker_cron_next('45 2 * * *', '2025-10-04 12:00Z', 'Australia/Lord_Howe'), '2025-10-04 15:45Z'::timestamptz,
          '45 2 * * * after 2025-10-04 12:00Z: 02:45 was not skipped');
SELECT is(broker.broker_cron_next('45 1 * * *', '2025-04-05 12:00Z', 'Australia/Lord_Howe'), '2025-04-05 14:45Z'::timestamptz,
          '45 1 * * * after 2025-04-05 12:00Z: 02:00 -> 01:30: fixed 01:45, first occurrence (+11)');
SELECT is(broker.broker_cron_next('45 1 * * *', '2025-04-05 14:45Z', 'Australia/Lord_Howe'), '2025-04-06 15:15Z'::timestamptz,
          '45 1 * * * after 2025-04-05 14:45Z: ... not again at 01:45 +10:30');
SELECT is(broker.broker_cron_next('*/15 * * * *', '2025-04-05 14:45Z', 'Australia/Lord_Howe'), '2025-04-05 15:00Z'::timestamptz,
          '*/15 * * * * after 2025-04-05 14:45Z: wildcard: 01:30 +10:30 right after the shift');
SELECT is(broker.broker_cron_next('*/15 * * * *', '2025-04-05 15:00Z', 'Australia/Lord_Howe'), '2025-04-05 15:15Z'::timestamptz,
          '*/15 * * * * after 2025-04-05 15:00Z: wildcard: 01:45 a second time');

-- Asia/Kathmandu (+05:45, no DST)
SELECT is(broker.broker_cron_next('0 9 * * *', '2025-06-01 00:00Z', 'Asia/Kathmandu'), '2025-06-01 03:15Z'::timestamptz,
          '0 9 * * * after 2025-06-01 00:00Z: a 45-minute offset');

SELECT * FROM finish();
ROLLBACK;
