// The dashboard's Automations and Events pages in a real browser against a real server delivering
// through the capture transport. Made through the API: an event with a schema, a published template, a
// contact and an enabled automation (trigger → send_email → delay of 1 hour); the event is sent for the
// contact and the engine starts a run, sends the message and waits in the delay. Then, in the browser:
// the list shows the automation and its status and its switch disables and enables it; the automation's
// page draws every step, top to bottom, with its counts, and lists the run; the run's page shows each
// step and links the message sent; the Events page shows the name, the schema and the payload received.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import {
  PHONE,
  docScreenshot,
  openPage,
  signIn,
  startSendingDashboard,
  withPage,
  type SendingDashboard,
} from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

const DOMAIN = 'welcome.example';
const EVENT = 'user.signed_up';
const CONTACT = 'ada@example.org';

let sending: SendingDashboard;
let api: SendingDashboard['api'];
let automationId = '';
/** Branches, a wait with a timeout and a loop: its graph has every kind of connection. */
let trialId = '';
let runId = '';
let emailId = '';

interface RunStep {
  key: string;
  type: string;
  status: string;
  output: Record<string, unknown> | null;
}

before(async () => {
  sending = await startSendingDashboard(DOMAIN);
  api = sending.api;
  await api('POST', '/events', { name: EVENT, schema: { plan: 'string', seats: 'number' } });
  const template = await api('POST', '/templates', {
    name: 'Welcome',
    subject: 'Welcome aboard',
    html: '<p>Welcome aboard</p>',
  });
  await api('POST', `/templates/${template.id as string}/publish`);
  await api('POST', '/contacts', { email: CONTACT, first_name: 'Ada' });
  automationId = (
    await api('POST', '/automations', {
      name: 'Welcome series',
      status: 'enabled',
      steps: [
        { key: 'start', type: 'trigger', config: { event_name: EVENT } },
        {
          key: 'welcome',
          type: 'send_email',
          config: { template: { id: template.id }, from: `Acme <hello@${DOMAIN}>` },
        },
        { key: 'pause', type: 'delay', config: { duration: '1 hour' } },
      ],
      connections: [
        { from: 'start', to: 'welcome', type: 'default' },
        { from: 'welcome', to: 'pause', type: 'default' },
      ],
    })
  ).id as string;
  await api('POST', '/events/send', { event: EVENT, email: CONTACT, payload: { plan: 'pro', seats: 3 } });

  const converted = await api('POST', '/segments', { name: 'Converted' });
  trialId = (
    await api('POST', '/automations', {
      name: 'Trial follow-up',
      status: 'enabled',
      steps: [
        { key: 'trial', type: 'trigger', config: { event_name: 'trial.started' } },
        {
          key: 'check',
          type: 'condition',
          config: { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' },
        },
        { key: 'thanks', type: 'send_email', config: { template: { id: template.id }, from: `hello@${DOMAIN}` } },
        { key: 'wait', type: 'wait_for_event', config: { event_name: 'trial.converted', timeout: '2 days' } },
        { key: 'tag', type: 'add_to_segment', config: { segment_id: converted.id } },
        { key: 'nudge', type: 'contact_update', config: { last_name: 'Nudged' } },
      ],
      connections: [
        { from: 'trial', to: 'check' },
        { from: 'check', to: 'thanks', type: 'condition_met' },
        { from: 'check', to: 'wait', type: 'condition_not_met' },
        { from: 'wait', to: 'tag', type: 'event_received' },
        { from: 'wait', to: 'nudge', type: 'timeout' },
        { from: 'nudge', to: 'wait' },
      ],
    })
  ).id as string;
  await api('POST', '/events/send', { event: 'trial.started', email: CONTACT, payload: { plan: 'pro' } });
  await api('POST', '/events/send', { event: 'trial.started', email: 'bob@example.org', payload: { plan: 'free' } });
  // Carl unsubscribed from everything: his run takes the branch that sends, and the send is skipped.
  await api('POST', '/contacts', { email: 'carl@example.org', unsubscribed: true });
  await api('POST', '/events/send', { event: 'trial.started', email: 'carl@example.org', payload: { plan: 'pro' } });

  // An automation that can no longer be enabled: the template its email step sends is gone.
  const offer = await api('POST', '/templates', { name: 'Offer', subject: 'An offer', html: '<p>Offer</p>' });
  await api('POST', `/templates/${offer.id as string}/publish`);
  await api('POST', '/automations', {
    name: 'Old offer',
    steps: [
      { key: 'start', type: 'trigger', config: { event_name: 'offer.requested' } },
      { key: 'offer', type: 'send_email', config: { template: { id: offer.id }, from: `hello@${DOMAIN}` } },
    ],
    connections: [{ from: 'start', to: 'offer' }],
  });
  await api('DELETE', `/templates/${offer.id as string}`);

  // The engine's worker starts the run, sends the message and enters the delay, where the run waits.
  await waitFor(
    async () => {
      const runs = (await api('GET', `/automations/${automationId}/runs`)).data as Array<{ id: string }>;
      if (runs.length === 0) return false;
      runId = runs[0]!.id;
      const run = await api('GET', `/automations/${automationId}/runs/${runId}`);
      const steps = run.steps as RunStep[];
      const welcome = steps.find((step) => step.key === 'welcome');
      emailId = typeof welcome?.output?.email_id === 'string' ? welcome.output.email_id : '';
      return emailId !== '' && steps.some((step) => step.key === 'pause' && step.status === 'waiting');
    },
    30_000,
    200,
  );
  // Ada's trial run is over once its email is sent, Carl's once its send is skipped; Bob's waits for
  // trial.converted.
  await waitFor(
    async () => {
      const counts = (await api('GET', `/automations/${trialId}/step-counts`)).data as Array<Record<string, unknown>>;
      const of = (key: string) => counts.find((count) => count.key === key)!;
      return of('thanks').completed === 1 && of('thanks').skipped === 1 && of('wait').waiting === 1;
    },
    30_000,
    200,
  );
});
after(() => sending?.close());

const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** One step's box in the drawing: its lines of text, in order. */
async function boxLines(page: Page, name: string): Promise<string[]> {
  const texts = await page.getByRole('group', { name, exact: true }).locator('text').allTextContents();
  return texts.map((text) => text.trim());
}

describe('automations', () => {
  test('the list and its switch, the graph with its counts, the run and its email', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Automations' }).click();
      await page.getByRole('heading', { level: 1, name: 'Automations' }).waitFor();
      const row = page.getByRole('row').filter({ hasText: 'Welcome series' });
      await row
        .locator('.status-badge')
        .filter({ hasText: /^Enabled$/ })
        .waitFor();
      const toggle = row.getByRole('switch', { name: 'Enabled: Welcome series' });
      assert.equal(await toggle.getAttribute('aria-checked'), 'true');
      await docScreenshot(page, 'automations');

      // Off, then on again: the badge follows, and so does the automation itself.
      await toggle.click();
      await row
        .locator('.status-badge')
        .filter({ hasText: /^Disabled$/ })
        .waitFor();
      assert.equal(await toggle.getAttribute('aria-checked'), 'false');
      await page.getByRole('status').filter({ hasText: '“Welcome series” is disabled.' }).waitFor();
      assert.equal((await api('GET', `/automations/${automationId}`)).status, 'disabled');
      await toggle.click();
      await row
        .locator('.status-badge')
        .filter({ hasText: /^Enabled$/ })
        .waitFor();
      assert.equal(await toggle.getAttribute('aria-checked'), 'true');
      assert.equal((await api('GET', `/automations/${automationId}`)).status, 'enabled');

      // Enabling is refused when the graph no longer holds: the API's reason is shown and the switch stays off.
      const offerRow = page.getByRole('row').filter({ hasText: 'Old offer' });
      const offerSwitch = offerRow.getByRole('switch', { name: 'Enabled: Old offer' });
      assert.equal(await offerSwitch.getAttribute('aria-checked'), 'false');
      await offerSwitch.click();
      const refusal = page.getByRole('alert').filter({ hasText: '“Old offer” could not be changed' });
      await refusal.getByText(/no template of this organization has the id/).waitFor();
      assert.equal(await offerSwitch.getAttribute('aria-checked'), 'false');
      await offerRow
        .locator('.status-badge')
        .filter({ hasText: /^Disabled$/ })
        .waitFor();

      // The status filter keeps it in the address: disabled ones only, then all again.
      await page.getByLabel('Status', { exact: true }).selectOption('disabled');
      await page.getByRole('row').filter({ hasText: 'Welcome series' }).waitFor({ state: 'detached' });
      await offerRow.waitFor();
      assert.match(page.url(), /#\/automations\?status=disabled$/);
      await page.getByLabel('Status', { exact: true }).selectOption('');
      await row.getByRole('link', { name: 'Welcome series' }).click();

      // The graph: every step drawn with what it does and its counts, the trigger on top.
      await page.getByRole('heading', { level: 1, name: 'Welcome series' }).waitFor();
      await page.getByRole('region', { name: "The automation's graph" }).waitFor();
      assert.deepEqual(await boxLines(page, 'Trigger step start'), [
        'Trigger',
        'start',
        'On “user.signed_up”',
        'Entered 1',
        'Waiting 0',
        'Completed 1',
        'Failed 0',
      ]);
      assert.deepEqual(await boxLines(page, 'Send email step welcome'), [
        'Send email',
        'welcome',
        'Template “Welcome”',
        'Entered 1',
        'Waiting 0',
        'Completed 1',
        'Failed 0',
      ]);
      assert.deepEqual(await boxLines(page, 'Delay step pause'), [
        'Delay',
        'pause',
        'Wait 1 hour',
        'Entered 1',
        'Waiting 1',
        'Completed 0',
        'Failed 0',
      ]);
      const top = async (name: string) => (await page.getByRole('group', { name, exact: true }).boundingBox())!.y;
      const [startY, welcomeY, pauseY] = [
        await top('Trigger step start'),
        await top('Send email step welcome'),
        await top('Delay step pause'),
      ];
      assert.ok(startY < welcomeY && welcomeY < pauseY, `top-down by depth: ${startY}, ${welcomeY}, ${pauseY}`);
      // Two connections, both default: two arrows and no label.
      assert.equal(await page.locator('.graph-connection').count(), 2);
      assert.equal(await page.locator('.graph-label').count(), 0);
      await page.getByText('The steps as a table').click();
      const table = page.getByRole('table', { name: 'Steps, with the runs that entered each' });
      const cells = async (row: number) => table.getByRole('row').nth(row).locator('td').allTextContents();
      assert.deepEqual(await cells(1), ['start', 'Trigger', 'On “user.signed_up”', 'welcome', '1', '0', '1', '0', '0']);
      assert.deepEqual(await cells(2), [
        'welcome',
        'Send email',
        'Template “Welcome”',
        'pause',
        '1',
        '0',
        '1',
        '0',
        '0',
      ]);
      assert.deepEqual(await cells(3), ['pause', 'Delay', 'Wait 1 hour', 'End', '1', '1', '0', '0', '0']);

      // The run, waiting in the delay, links to its page.
      const runRow = page.getByRole('row').filter({ hasText: runId });
      await runRow.getByText('Running', { exact: true }).waitFor();
      await runRow.getByRole('link').click();
      await page.getByRole('heading', { level: 1, name: 'Automation run' }).waitFor();
      await page.locator('section[aria-labelledby="summary-title"]').getByText('Running', { exact: true }).waitFor();
      const stepItems = page.getByRole('listitem').filter({ has: page.getByRole('heading', { level: 3 }) });
      assert.deepEqual(
        (await stepItems.getByRole('heading', { level: 3 }).allTextContents()).map((text) => text.trim()),
        ['1. Trigger start', '2. Send email welcome', '3. Delay pause'],
      );
      const sentStep = page.getByRole('listitem', { name: 'Step welcome' });
      await sentStep.getByText('Completed', { exact: true }).first().waitFor();
      await page.getByRole('listitem', { name: 'Step pause' }).getByText('Waiting', { exact: true }).waitFor();
      const emailLink = sentStep.getByRole('link', { name: emailId });
      assert.equal(await emailLink.getAttribute('href'), `#/emails/${emailId}`);
      await sentStep.getByText('Output').click();
      assert.match((await sentStep.getByLabel('The output of welcome').textContent()) ?? '', new RegExp(emailId));
      await docScreenshot(page, 'automation-run');
      await emailLink.click();
      await page.getByRole('heading', { level: 1, name: 'Welcome aboard' }).waitFor();
      const email = await api('GET', `/emails/${emailId}`);
      assert.deepEqual(email.to, [CONTACT]);
      assert.deepEqual(unexpected(problems), []);
    });
  });

  test('a graph with branches, a wait and a loop: labelled connections, rows by depth, counts per branch', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, `/automations/${trialId}`, 'Trial follow-up');
      await page.getByRole('region', { name: "The automation's graph" }).waitFor();
      const top = async (name: string) => (await page.getByRole('group', { name, exact: true }).boundingBox())!.y;
      const rows = {
        trial: await top('Trigger step trial'),
        check: await top('Condition step check'),
        thanks: await top('Send email step thanks'),
        wait: await top('Wait for event step wait'),
        tag: await top('Add to segment step tag'),
        nudge: await top('Update contact step nudge'),
      };
      assert.ok(rows.trial < rows.check && rows.check < rows.thanks, JSON.stringify(rows));
      assert.equal(rows.thanks, rows.wait);
      assert.ok(rows.wait < rows.tag, JSON.stringify(rows));
      assert.equal(rows.tag, rows.nudge);
      // Every connection drawn; those not default labelled with their type; the loop back up dashed.
      assert.equal(await page.locator('.graph-connection').count(), 6);
      assert.deepEqual((await page.locator('.graph-label').allTextContents()).sort(), [
        'condition met',
        'condition not met',
        'event received',
        'timeout',
      ]);
      assert.equal(await page.locator('.graph-connection-back').count(), 1);
      // Ada's plan met the condition and her run sent its email; Bob's waits for trial.converted.
      assert.deepEqual((await boxLines(page, 'Condition step check')).slice(2), [
        'event.plan = "pro"',
        'Entered 3',
        'Waiting 0',
        'Completed 3',
        'Failed 0',
      ]);
      // Carl's copy was not sent (he unsubscribed): entered, skipped, neither completed nor failed.
      assert.deepEqual((await boxLines(page, 'Send email step thanks')).slice(3), [
        'Entered 2',
        'Waiting 0',
        'Completed 1',
        'Failed 0',
      ]);
      // A summary too long for one line goes on to a second.
      assert.deepEqual((await boxLines(page, 'Wait for event step wait')).slice(2), [
        'Until “trial.converted”, at',
        'most 2 days',
        'Entered 1',
        'Waiting 1',
        'Completed 0',
        'Failed 0',
      ]);
      assert.deepEqual((await boxLines(page, 'Add to segment step tag')).slice(2), [
        'To “Converted”',
        'Entered 0',
        'Waiting 0',
        'Completed 0',
        'Failed 0',
      ]);
      await page.evaluate("document.getElementById('graph-title').scrollIntoView()");
      await docScreenshot(page, 'automation-graph');
      await page.getByText('The steps as a table').click();
      const thanks = page
        .getByRole('table', { name: 'Steps, with the runs that entered each' })
        .getByRole('row')
        .filter({ hasText: 'Template “Welcome”' });
      assert.deepEqual((await thanks.locator('td').allTextContents()).slice(4), ['2', '0', '1', '0', '1']);

      // Carl's run: the send step skipped, and why, with no email to link.
      const carlRuns = (await api('GET', `/automations/${trialId}/runs?status=completed`)).data as Array<{
        id: string;
      }>;
      let carlRun = '';
      for (const run of carlRuns) {
        const steps = (await api('GET', `/automations/${trialId}/runs/${run.id}`)).steps as RunStep[];
        if (steps.some((step) => step.key === 'thanks' && step.status === 'skipped')) carlRun = run.id;
      }
      assert.ok(carlRun, 'a run whose send was skipped');
      await openPage(page, `/automations/${trialId}/runs/${carlRun}`, 'Automation run');
      const skipped = page.getByRole('listitem', { name: 'Step thanks' });
      await skipped.getByText('Skipped', { exact: true }).waitFor();
      await skipped.getByText('Not sent: the contact has unsubscribed.').waitFor();
      assert.equal(await skipped.getByRole('link').count(), 0);

      // Stop: disabled, and Bob's run, waiting for trial.converted, cancelled.
      await page.getByRole('link', { name: '“Trial follow-up”' }).click();
      await page.getByRole('heading', { level: 1, name: 'Trial follow-up' }).waitFor();
      await page.getByRole('button', { name: 'Stop automation' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Stop automation' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: 'Stopped: disabled, and its running runs cancelled.' })
        .waitFor();
      await page
        .locator('section[aria-labelledby="summary-title"] .status-badge')
        .filter({ hasText: /^Disabled$/ })
        .waitFor();
      assert.equal(await page.getByRole('switch').getAttribute('aria-checked'), 'false');
      await page.getByLabel('Run status').selectOption('cancelled');
      const cancelled = page.getByRole('table', { name: 'Runs, newest first' }).getByRole('row');
      await cancelled.nth(1).getByText('Cancelled', { exact: true }).waitFor();
      assert.equal(await cancelled.count(), 2);
      await waitFor(async () => (await boxLines(page, 'Wait for event step wait')).includes('Waiting 0'));
      assert.deepEqual(unexpected(problems), []);
    });
  });

  test('at phone width the graph scrolls inside its frame, not the page', async (t) => {
    await withPage(
      t,
      sending.dashboard,
      async ({ page, problems }) => {
        await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
        await openPage(page, `/automations/${automationId}`, 'Welcome series');
        const frame = page.getByRole('region', { name: "The automation's graph" });
        await frame.waitFor();
        await page.getByRole('group', { name: 'Delay step pause', exact: true }).waitFor();
        assert.ok(
          await page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth'),
          'the page itself does not scroll sideways',
        );
        const box = await frame.boundingBox();
        assert.ok(box && box.width <= PHONE.width, `the frame fits: ${JSON.stringify(box)}`);
        assert.deepEqual(unexpected(problems), []);
      },
      { viewport: PHONE },
    );
  });

  test('the events page: the name, its schema and the payload received', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Events' }).waitFor();
      const definition = page.getByRole('table', { name: 'Event names, with their schemas' }).getByRole('row', {
        name: new RegExp(EVENT.replace('.', '\\.')),
      });
      await definition.getByText('plan: string').waitFor();
      await definition.getByText('seats: number').waitFor();

      const received = page
        .getByRole('table', { name: 'Received events, newest first' })
        .getByRole('row')
        .filter({ hasText: EVENT });
      await received.getByText(EVENT).waitFor();
      await received.getByText(CONTACT).waitFor();
      const payload = JSON.parse((await received.getByLabel(`The payload of ${EVENT}`).textContent()) ?? '') as unknown;
      assert.deepEqual(payload, { plan: 'pro', seats: 3 });

      // A name's link narrows the received events to it, in the address; another name finds none.
      await definition.getByRole('link').click();
      await page.getByRole('table', { name: `Received “${EVENT}” events, newest first` }).waitFor();
      assert.match(page.url(), /#\/events\?event=user\.signed_up$/);
      await docScreenshot(page, 'events');
      await page.getByRole('textbox', { name: 'Event name' }).fill('order.placed');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByText('No “order.placed” events received').waitFor();
      await page.getByRole('button', { name: 'Clear filters' }).click();
      await page.getByRole('table', { name: 'Received events, newest first' }).waitFor();
      assert.deepEqual(unexpected(problems), []);
    });
  });
});

describe('automations, opened by address', () => {
  test('an unknown automation says so', async (t) => {
    await withPage(t, sending.dashboard, async ({ page }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, '/automations/00000000-0000-4000-8000-000000000000', 'Automation');
      await page.getByRole('alert').filter({ hasText: 'The automation could not be loaded' }).waitFor();
    });
  });
});
