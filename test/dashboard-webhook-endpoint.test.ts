// A webhook endpoint's page in a real browser against a real server and a real receiver on loopback:
// a test event of a picked type arrives signed and marked as a test, each delivery's payload opens to
// the exact body the receiver got, "Replay all failed since" sends each failed delivery once (a second
// click, or a double click, nothing more), and the on/off switch stops and allows deliveries.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { EVENT_TYPES } from '../src/webhooks/event-types.ts';
import { docScreenshot, openPage, signIn, startDashboard, withPage, type Dashboard } from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

interface Received {
  headers: IncomingHttpHeaders;
  raw: string;
  body: { id: string; type: string; test?: boolean };
}

let dashboard: Dashboard | undefined;
let server: Server | undefined;
let receiverUrl = '';
const received: Received[] = [];
/** What the receiver answers next; the tests switch it between refusing (410) and taking (200). */
let answer = 200;

before(async () => {
  server = createServer((request, response) => {
    let raw = '';
    request.on('data', (chunk) => (raw += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, raw, body: JSON.parse(raw) });
      response.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'thanks' : 'gone');
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  dashboard = await startDashboard({ env: { MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' } });
});
after(async () => {
  await dashboard?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
});

async function call(token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${dashboard!.base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The datetime-local value of a moment in UTC (the browser context runs in UTC). */
const utcInput = (date: Date) => date.toISOString().slice(0, 16);

test('an endpoint page: a test event of a picked type, each payload, "Replay all failed since" once per failed delivery, the on/off switch', async (t) => {
  const d = dashboard!;
  await withPage(
    t,
    d,
    async ({ page, problems }) => {
      await signIn(page, d.user.email, d.user.password);
      const token = await page.evaluate<string>("JSON.parse(sessionStorage.getItem('mailroom.session')).token");
      const created = await call(token, 'POST', '/webhooks', { endpoint: receiverUrl, events: ['email.delivered'] });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.id as string;
      const secret = created.body.signing_secret as string;
      await openPage(page, `/webhooks/${id}`, 'Webhook endpoint');

      const onOff = page.getByRole('switch', { name: 'Send events to this endpoint' });
      assert.equal(await onOff.getAttribute('aria-checked'), 'true');
      // The type picker offers the whole catalog.
      const typeSelect = page.getByLabel('Event type');
      const offered = await typeSelect.locator('option').allTextContents();
      assert.deepEqual([...offered].sort(), [...EVENT_TYPES].sort());

      // Two test events the receiver refuses (410 fails a delivery at once). Deliveries to an endpoint run
      // several at once, so each is received before the next is sent, to keep them in this order.
      answer = 410;
      for (const [i, type] of ['email.bounced', 'email.sent'].entries()) {
        await typeSelect.selectOption(type);
        await page.getByRole('button', { name: 'Send test event' }).click();
        await page
          .getByRole('status')
          .filter({ hasText: `A test ${type} event was queued` })
          .waitFor();
        await waitFor(() => received.length === i + 1, 20_000);
      }
      assert.deepEqual(
        received.map((r) => [r.body.type, r.body.test]),
        [
          ['email.bounced', true],
          ['email.sent', true],
        ],
      );
      for (const request of received) {
        const verified = new Webhook(secret).verify(request.raw, request.headers as Record<string, string>);
        assert.equal((verified as { id: string }).id, request.body.id, 'signed like any event');
      }
      const deliveries = page.locator('.deliveries > li');
      await waitFor(async () => (await deliveries.filter({ hasText: 'Attempt 1: HTTP 410' }).count()) === 2, 20_000);
      const bounced = deliveries.filter({ hasText: 'email.bounced' });
      await bounced.getByText('(test)').waitFor();
      await bounced.getByText('Failed', { exact: true }).waitFor();
      await bounced.getByText('gone').waitFor();

      // Its payload opens to the exact body the receiver got.
      await bounced.locator('summary').click();
      const shown = await bounced.getByLabel('The JSON body of email.bounced').textContent();
      assert.deepEqual(JSON.parse(shown!), JSON.parse(received[0]!.raw));

      // The receiver takes them now: both are sent again, once, with their event ids.
      answer = 200;
      await page.getByLabel('Failed since').fill(utcInput(new Date(Date.now() - 3600_000)));
      await page.getByRole('button', { name: 'Replay all failed' }).click();
      await page.getByRole('status').filter({ hasText: '2 failed deliveries were queued again.' }).waitFor();
      await waitFor(() => received.length === 4, 20_000);
      assert.deepEqual(
        new Set(received.slice(2).map((r) => r.body.id)),
        new Set(received.slice(0, 2).map((r) => r.body.id)),
      );
      await waitFor(async () => (await deliveries.filter({ hasText: 'Succeeded' }).count()) === 2, 20_000);
      assert.equal(await deliveries.filter({ hasText: '(replay)' }).count(), 2);

      // Again: nothing failed is left unreplayed, nothing is sent.
      await page.getByRole('button', { name: 'Replay all failed' }).click();
      await page.getByRole('status').filter({ hasText: 'No failed delivery to replay since then' }).waitFor();

      // One more failure, then a double click: it is sent once.
      answer = 410;
      await typeSelect.selectOption('contact.created');
      await page.getByRole('button', { name: 'Send test event' }).click();
      await waitFor(() => received.length === 5, 20_000);
      await deliveries
        .filter({ hasText: 'contact.created' })
        .getByText('Failed', { exact: true })
        .waitFor({ timeout: 20_000 });
      answer = 200;
      await page.getByRole('button', { name: 'Replay all failed' }).dblclick();
      await waitFor(() => received.length === 6, 20_000);
      await waitFor(async () => (await deliveries.filter({ hasText: 'Succeeded' }).count()) === 3, 20_000);
      await page.getByRole('heading', { name: 'Test and replay' }).scrollIntoViewIfNeeded();
      await docScreenshot(page, 'webhook-endpoint');
      await deliveries.first().locator('summary').click();
      await deliveries.first().locator('pre').scrollIntoViewIfNeeded();
      await docScreenshot(page, 'webhook-payload');
      assert.equal(received.length, 6, 'the double click replayed the failed delivery once');
      assert.equal(received[5]!.body.id, received[4]!.body.id);

      // Off: no test event can be sent, the API refuses one too; on again, it can.
      await onOff.click();
      await waitFor(async () => (await onOff.getAttribute('aria-checked')) === 'false');
      await page.getByText('Disabled: events are not sent').waitFor();
      assert.equal(await page.getByRole('button', { name: 'Send test event' }).isDisabled(), true);
      const refused = await call(token, 'POST', `/webhooks/${id}/test`, { type: 'email.sent' });
      assert.deepEqual([refused.status, refused.body.name], [400, 'invalid_state']);
      await onOff.click();
      await waitFor(async () => (await onOff.getAttribute('aria-checked')) === 'true');
      assert.equal(await page.getByRole('button', { name: 'Send test event' }).isDisabled(), false);
      assert.equal(received.length, 6);
      assert.deepEqual(problems, []);
    },
    { timezoneId: 'UTC' },
  );
});
