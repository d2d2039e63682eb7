import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import { loadConfig, type Config } from '../src/platform/config.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { errorBody, HTTP_STATUS } from '../src/platform/http/error-envelope.ts';
import { forbiddenAddressReason, isForbiddenAddress, parseEndpointUrl } from '../src/webhooks/endpoint-address.ts';
import {
  createSafeDispatcher,
  postJson,
  type PostJsonAnswer,
  type PostJsonFailure,
  type PostJsonResult,
} from '../src/webhooks/safe-dispatcher.ts';
import { startDnsServer, type DnsServer, type Zone, type ZoneEntry } from './helpers/dns-server.ts';

// Real peers only: HTTP servers on 127.0.0.1 and a DNS server on loopback. Public addresses are only ever
// resolved, never connected to; every TCP connection this process opens is recorded and, at the end,
// checked to have gone to loopback.

const PUBLIC_V4 = '93.184.215.14';
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';

const zone: Zone = new Map<string, ZoneEntry | 'servfail' | 'silent'>([
  ['public.hooks.test', { a: [PUBLIC_V4], aaaa: [PUBLIC_V6] }],
  ['v6only.hooks.test', { aaaa: [PUBLIC_V6] }],
  ['private.hooks.test', { a: ['10.1.2.3'] }],
  ['mixed-a.hooks.test', { a: [PUBLIC_V4, '10.0.0.5'] }],
  ['mixed-aaaa.hooks.test', { a: [PUBLIC_V4], aaaa: ['fd00::1'] }],
  ['mapped.hooks.test', { aaaa: ['::ffff:7f00:1'] }],
  ['metadata.hooks.test', { a: ['169.254.169.254'] }],
  ['loop.hooks.test', { a: ['127.0.0.1'] }],
  ['nodata.hooks.test', {}],
  ['servfail.hooks.test', 'servfail'],
]);

let dns: DnsServer;
const connectedTo: string[] = [];
const onSocket = (message: unknown) => {
  const { socket } = message as { socket: Socket };
  socket.once('connect', () => connectedTo.push(socket.remoteAddress ?? 'unknown'));
};

before(async () => {
  diagnostics.subscribe('net.client.socket', onSocket);
  dns = await startDnsServer(zone);
});

after(async () => {
  diagnostics.unsubscribe('net.client.socket', onSocket);
  await dns.close();
  assert.ok(connectedTo.length > 0, 'the connection observer saw the loopback connections');
  assert.deepEqual(
    connectedTo.filter((address) => address !== '127.0.0.1'),
    [],
    'every TCP connection went to loopback',
  );
});

function configWith(env: Record<string, string> = {}): Config {
  return loadConfig({
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '1000',
    MAILROOM_WEBHOOK_TIMEOUT_MS: '500',
    ...env,
  });
}

const LOOPBACK_ALLOWED = { MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' };

interface TestServer {
  port: number;
  url: string;
  connections: number;
  requests: { method: string; headers: IncomingMessage['headers']; body: string }[];
  close(): Promise<void>;
}

async function startHttpServer(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  const listener: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      server.requests.push({ method: req.method ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  };
  const http = createServer(listener);
  http.on('connection', () => server.connections++);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  const server: TestServer = {
    port,
    url: `http://127.0.0.1:${port}`,
    connections: 0,
    requests: [],
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
  return server;
}

async function withServer<T>(
  handler: (req: IncomingMessage, res: ServerResponse, body: string) => void,
  use: (server: TestServer) => Promise<T>,
): Promise<T> {
  const server = await startHttpServer(handler);
  try {
    return await use(server);
  } finally {
    await server.close();
  }
}

async function withDispatcher<T>(
  config: Config,
  use: (dispatcher: Dispatcher) => Promise<T>,
  options?: { connectionsPerOrigin?: number },
): Promise<T> {
  const dispatcher = createSafeDispatcher(config, options);
  try {
    return await use(dispatcher);
  } finally {
    await dispatcher.destroy();
  }
}

function answered(result: PostJsonResult): PostJsonAnswer {
  assert.ok('status' in result, `expected an HTTP answer, got ${JSON.stringify(result)}`);
  return result;
}

function failed(result: PostJsonResult): PostJsonFailure {
  assert.ok('reason' in result, `expected a transport failure, got ${JSON.stringify(result)}`);
  return result;
}

async function assertRefused(endpoint: string, config: Config, message?: RegExp): Promise<void> {
  await assert.rejects(parseEndpointUrl(endpoint, config), (error: unknown) => {
    assert.ok(error instanceof ServiceError, `expected a ServiceError, got ${String(error)}`);
    assert.deepEqual(
      { statusCode: HTTP_STATUS[error.name], name: error.name, field: error.field },
      { statusCode: 400, name: 'invalid_webhook_endpoint', field: 'endpoint' },
    );
    if (message) assert.match(error.message, message);
    return true;
  });
}

describe('isForbiddenAddress', () => {
  const forbidden = [
    '127.0.0.1',
    '127.255.255.254',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '0.1.2.3',
    '255.255.255.255',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '192.0.0.8',
    '192.0.2.1',
    '198.18.0.1',
    '198.19.255.255',
    '198.51.100.7',
    '203.0.113.9',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '::ffff:0:7f00:1', // RFC 6145 IPv4-translated
    '::127.0.0.1', // IPv4-compatible (deprecated)
    'fe80::1',
    'fe80::1%eth0',
    'fc00::1',
    'fd12:3456:789a::1',
    'fec0::1', // site-local (deprecated)
    'ff02::1',
    '100::1', // discard
    '2001:db8::1', // documentation
    '64:ff9b::a00:1', // NAT64 of 10.0.0.1
    '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
    '64:ff9b::a9fe:a9fe', // NAT64 of 169.254.169.254
    '64:ff9b:1::a00:1', // local-use NAT64 prefix
    '2002:a00:1::1', // 6to4 of 10.0.0.1
    '2002:5db8:d70e::1', // 6to4 of a public address: 6to4 is refused outright
    '2001:0:a00:1::1', // Teredo
    'not-an-ip',
    '127.1',
    '0x7f000001',
    '2130706433',
    '',
  ];
  for (const address of forbidden) {
    test(`refuses ${address || '(empty)'}`, () => {
      assert.equal(isForbiddenAddress(address, []), true);
      assert.equal(typeof forbiddenAddressReason(address, []), 'string');
    });
  }

  const allowed = [
    PUBLIC_V4,
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '::ffff:93.184.215.14',
    PUBLIC_V6,
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '64:ff9b::5db8:d70e', // NAT64 (DNS64) of a public address
  ];
  for (const address of allowed) {
    test(`accepts ${address}`, () => assert.equal(isForbiddenAddress(address, []), false));
  }

  test('names the kind of address refused', () => {
    assert.equal(forbiddenAddressReason('127.0.0.1', []), 'a loopback address');
    assert.equal(forbiddenAddressReason('10.0.0.1', []), 'a private address');
    assert.equal(forbiddenAddressReason('169.254.169.254', []), 'a link-local address');
    assert.equal(forbiddenAddressReason('fd00::1', []), 'a unique-local address');
    assert.equal(forbiddenAddressReason('100.64.0.1', []), 'a carrier-grade NAT address');
  });

  test('the allow list exempts its ranges, in either address family and in IPv4-mapped form', () => {
    assert.equal(isForbiddenAddress('127.0.0.1', ['127.0.0.0/8']), false);
    assert.equal(isForbiddenAddress('127.5.6.7', ['127.0.0.0/8']), false);
    assert.equal(isForbiddenAddress('::ffff:127.0.0.1', ['127.0.0.0/8']), false);
    assert.equal(isForbiddenAddress('::1', ['::1/128']), false);
    assert.equal(isForbiddenAddress('127.0.0.1', ['::ffff:127.0.0.0/104']), false);
    assert.equal(isForbiddenAddress('10.0.0.1', ['127.0.0.0/8']), true);
    assert.equal(isForbiddenAddress('127.0.0.1', ['::1/128']), true);
    assert.equal(isForbiddenAddress('::1', ['127.0.0.0/8']), true);
    assert.equal(isForbiddenAddress('10.0.0.1', ['10.0.0.0/8', '192.168.0.0/16']), false);
    assert.equal(isForbiddenAddress('10.0.0.1', ['not a cidr']), true, 'an unreadable entry exempts nothing');
  });
});

describe('parseEndpointUrl refuses', () => {
  const refused: [string, RegExp][] = [
    ['', /non-empty/],
    ['not a url', /whitespace/],
    ['hooks.example.com/path', /not a valid URL/],
    ['http://', /not a valid URL/],
    [' http://public.hooks.test/', /whitespace/],
    ['http://public.hooks.test/\n', /whitespace/],
    [`http://public.hooks.test/${'a'.repeat(2048)}`, /longer than 2048/],
    ['ftp://public.hooks.test/', /http or https.*ftp:/],
    ['javascript:alert(1)', /http or https.*javascript:/],
    ['file:///etc/passwd', /http or https/],
    ['http://user:pass@public.hooks.test/', /credentials/],
    ['http://user@public.hooks.test/', /credentials/],
    ['http://:pass@public.hooks.test/', /credentials/],
    ['http://127.0.0.1', /loopback/],
    ['http://127.0.0.1:8080/hook', /loopback/],
    ['http://127.1', /127\.0\.0\.1.*loopback/],
    ['http://2130706433', /127\.0\.0\.1.*loopback/],
    ['http://0177.0.0.1', /127\.0\.0\.1.*loopback/],
    ['http://0x7f000001', /127\.0\.0\.1.*loopback/],
    ['http://0x7f.1', /127\.0\.0\.1.*loopback/],
    ['http://[::1]', /loopback/],
    ['http://[::ffff:127.0.0.1]', /loopback/],
    ['http://[::ffff:7f00:1]', /loopback/],
    ['http://[::ffff:a9fe:a9fe]/', /link-local/],
    ['http://[fe80::1]', /link-local/],
    ['http://[fc00::1]', /unique-local/],
    ['http://[::]', /unspecified/],
    ['http://[64:ff9b::a00:1]/', /NAT64.*10\.0\.0\.1/],
    ['http://10.0.0.1', /private/],
    ['http://172.16.0.1', /private/],
    ['http://192.168.1.1', /private/],
    ['http://169.254.169.254/latest/meta-data', /link-local/],
    ['http://100.64.0.1', /carrier-grade NAT/],
    ['http://0.0.0.0', /unspecified/],
    ['http://0', /0\.0\.0\.0/],
    ['http://224.0.0.1', /multicast/],
    ['http://255.255.255.255', /broadcast/],
    ['http://localhost', /local name/],
    ['http://localhost:3000/hook', /local name/],
    ['http://LOCALHOST./', /local name/],
    ['http://foo.localhost', /local name/],
    ['http://private.hooks.test/hook', /resolves to 10\.1\.2\.3, a private address/],
    ['http://mixed-a.hooks.test/', /resolves to 10\.0\.0\.5/],
    ['http://mixed-aaaa.hooks.test/', /resolves to fd00::1, a unique-local address/],
    ['http://mapped.hooks.test/', /resolves to ::ffff:127\.0\.0\.1, a loopback address/],
    ['http://metadata.hooks.test/', /169\.254\.169\.254/],
    ['http://loop.hooks.test/', /127\.0\.0\.1/],
    ['http://missing.hooks.test/', /does not resolve/],
    ['http://nodata.hooks.test/', /does not resolve/],
    ['http://servfail.hooks.test/', /could not be resolved/],
  ];
  for (const [endpoint, message] of refused) {
    test(
      endpoint.length > 80 ? `${endpoint.slice(0, 40)}… (${endpoint.length} characters)` : JSON.stringify(endpoint),
      () => assertRefused(endpoint, configWith(), message),
    );
  }

  test('a DNS server that never answers: refused once the DNS time-out passes', async () => {
    zone.set('silent.hooks.test', 'silent');
    const started = Date.now();
    await assertRefused('http://silent.hooks.test/', configWith({ MAILROOM_DNS_TIMEOUT_MS: '300' }), /could not be/);
    // Without the setting the resolver would wait its own 5 s a try, several tries: far over 10 s.
    assert.ok(Date.now() - started < 10_000);
  });

  test('the error body is the API envelope with field endpoint', async () => {
    const error = await parseEndpointUrl('http://10.0.0.1/', configWith()).catch((e: unknown) => e);
    assert.ok(error instanceof ServiceError);
    assert.deepEqual(errorBody(error), {
      statusCode: 400,
      name: 'invalid_webhook_endpoint',
      message: 'endpoint host 10.0.0.1 is a private address; webhooks must reach a public address',
      field: 'endpoint',
    });
  });
});

describe('parseEndpointUrl accepts', () => {
  const accepted: [string, string][] = [
    [`http://${PUBLIC_V4}/hook`, `http://${PUBLIC_V4}/hook`],
    [`https://[${PUBLIC_V6}]:8443/hook`, `https://[${PUBLIC_V6}]:8443/hook`],
    ['http://[::ffff:93.184.215.14]/', 'http://[::ffff:5db8:d70e]/'],
    ['https://public.hooks.test/webhooks?source=mailroom', 'https://public.hooks.test/webhooks?source=mailroom'],
    ['HTTPS://Public.Hooks.Test:8080/Path', 'https://public.hooks.test:8080/Path'],
    ['https://v6only.hooks.test/', 'https://v6only.hooks.test/'],
  ];
  for (const [endpoint, href] of accepted) {
    test(endpoint, async () => {
      const url = await parseEndpointUrl(endpoint, configWith());
      assert.ok(url instanceof URL);
      assert.equal(url.href, href);
    });
  }

  test('MAILROOM_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 makes loopback endpoints acceptable, and only those', async () => {
    const config = configWith(LOOPBACK_ALLOWED);
    assert.equal((await parseEndpointUrl('http://127.0.0.1:4567/hook', config)).href, 'http://127.0.0.1:4567/hook');
    assert.equal((await parseEndpointUrl('http://127.1:4567/', config)).hostname, '127.0.0.1');
    assert.equal((await parseEndpointUrl('http://[::ffff:127.0.0.1]:4567/', config)).port, '4567');
    assert.equal((await parseEndpointUrl('http://loop.hooks.test:4567/', config)).hostname, 'loop.hooks.test');
    await assertRefused('http://10.0.0.1/', config, /private/);
    await assertRefused('http://[::1]/', config, /loopback/);
    await assertRefused('http://localhost:4567/', config, /local name/);
    await assertRefused('http://metadata.hooks.test/', config, /link-local/);
  });
});

describe('safe dispatcher', () => {
  const ok = (_req: IncomingMessage, res: ServerResponse, body: string) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`received ${body.length} bytes`);
  };

  test('with 127.0.0.0/8 allowed, a POST to a loopback server succeeds', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
        const payload = JSON.stringify({ type: 'email.delivered', data: { email_id: 'e1' } });
        const result = answered(
          await postJson(dispatcher, `${server.url}/hook`, payload, { 'x-service-signature': 't=1,v1=ab' }),
        );
        assert.equal(result.status, 200);
        assert.equal(result.body, `received ${payload.length} bytes`);
        // A duration in milliseconds (not seconds, not a timestamp), whatever the machine's speed.
        assert.ok(result.durationMs >= 0 && result.durationMs < 60_000);
        const [seen] = server.requests;
        assert.equal(seen?.method, 'POST');
        assert.equal(seen?.body, payload);
        assert.equal(seen?.headers['content-type'], 'application/json');
        assert.equal(seen?.headers['x-service-signature'], 't=1,v1=ab');
      }),
    ));

  test('a name resolving to an allowed loopback address is connected to', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
        const result = answered(await postJson(dispatcher, `http://loop.hooks.test:${server.port}/`, '{}'));
        assert.equal(result.status, 200);
        assert.equal(server.requests[0]?.headers.host, `loop.hooks.test:${server.port}`);
      }),
    ));

  test('without an allow list, an IP-literal loopback URL fails with forbidden_address and no connection', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(), async (dispatcher) => {
        for (const url of [server.url, `http://127.1:${server.port}`, `http://[::ffff:127.0.0.1]:${server.port}`]) {
          const result = failed(await postJson(dispatcher, url, '{}'));
          assert.equal(result.reason, 'forbidden_address');
          assert.match(result.message, /loopback/);
        }
        assert.equal(server.connections, 0, 'the server never saw a connection');
      }),
    ));

  test('without an allow list, a name resolving to loopback fails with forbidden_address and no connection', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(), async (dispatcher) => {
        const result = failed(await postJson(dispatcher, `http://loop.hooks.test:${server.port}/`, '{}'));
        assert.equal(result.reason, 'forbidden_address');
        assert.match(result.message, /loop\.hooks\.test resolves to 127\.0\.0\.1, a loopback address/);
        assert.equal(server.connections, 0);
      }),
    ));

  test('a name whose DNS answer changes after registration is refused at connect time, before connecting', () =>
    withServer(
      (_req, res) => {
        // Closing each connection makes the next attempt connect (and so look the name up) again.
        res.writeHead(204, { connection: 'close' });
        res.end();
      },
      (server) => {
        const config = configWith({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' });
        return withDispatcher(config, async (dispatcher) => {
          zone.set('rebind.hooks.test', { a: ['127.0.0.1'] });
          const endpoint = await parseEndpointUrl(`http://rebind.hooks.test:${server.port}/hook`, config);
          assert.equal(answered(await postJson(dispatcher, endpoint, '{}')).status, 204);
          assert.equal(server.connections, 1);

          // First a forbidden answer that is still on loopback (127.0.0.2 is outside the allow list), so
          // that a broken guard would send nothing off this machine and the test stops here.
          zone.set('rebind.hooks.test', { a: ['127.0.0.2'] });
          const canary = failed(await postJson(dispatcher, endpoint, '{}'));
          assert.equal(canary.reason, 'forbidden_address');
          assert.match(canary.message, /rebind\.hooks\.test resolves to 127\.0\.0\.2, a loopback address/);

          zone.set('rebind.hooks.test', { a: ['169.254.169.254'] });
          const socketsBefore = connectedTo.length;
          const result = failed(await postJson(dispatcher, endpoint, '{}'));
          assert.equal(result.reason, 'forbidden_address');
          // The message comes from the connector's lookup: the address was refused as the DNS answer.
          assert.match(result.message, /rebind\.hooks\.test resolves to 169\.254\.169\.254, a link-local address/);
          assert.equal(connectedTo.length, socketsBefore, 'no socket connected anywhere');

          // A name with one allowed and one forbidden address is refused as a whole.
          zone.set('rebind.hooks.test', { a: ['127.0.0.1', '127.0.0.2'] });
          assert.equal(failed(await postJson(dispatcher, endpoint, '{}')).reason, 'forbidden_address');
          zone.set('rebind.hooks.test', { a: ['127.0.0.1'], aaaa: ['fd00::1'] });
          assert.equal(failed(await postJson(dispatcher, endpoint, '{}')).reason, 'forbidden_address');
          assert.equal(server.connections, 1);
        });
      },
    ));

  test('a redirect is returned as its status and never followed', async () => {
    const target = await startHttpServer(ok);
    try {
      await withServer(
        (req, res) => {
          res.writeHead(Number(req.url?.slice(1)), { location: `${target.url}/elsewhere` });
          res.end('moved');
        },
        (server) =>
          withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
            for (const status of [301, 302, 303, 307, 308]) {
              const result = answered(await postJson(dispatcher, `${server.url}/${status}`, '{}'));
              assert.equal(result.status, status);
              assert.equal(result.body, 'moved');
            }
            assert.equal(server.requests.length, 5);
          }),
      );
      assert.equal(target.connections, 0, 'the redirect target was never contacted');
    } finally {
      await target.close();
    }
  });

  test('a server that never answers: reason timeout within MAILROOM_WEBHOOK_TIMEOUT_MS', () =>
    withServer(
      () => {
        // never answers
      },
      (server) =>
        withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
          const result = failed(await postJson(dispatcher, server.url, '{}'));
          // The kind of failure says the deadline ended it: only a time limit gives reason timeout.
          assert.equal(result.reason, 'timeout');
          // Not before the deadline (500 ms). The upper bound is twenty times it: without the setting the
          // attempt would wait for undici's own 300 s headers timeout, or for ever, far past it.
          assert.ok(result.durationMs >= 450 && result.durationMs < 10_000, `took ${result.durationMs} ms`);
        }),
    ));

  test('an answer whose body stalls after the status: the status and what had arrived, at the deadline', () =>
    withServer(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('partial'); // and nothing more
      },
      (server) =>
        withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
          const result = answered(await postJson(dispatcher, server.url, '{}'));
          assert.deepEqual({ status: result.status, body: result.body }, { status: 200, body: 'partial' });
          // The body never ends, so only a time limit can have ended the read: not before the deadline
          // (500 ms), and under twenty times it, where without the setting it would wait for undici's
          // own 300 s body timeout, or for ever.
          assert.ok(result.durationMs >= 450 && result.durationMs < 10_000, `took ${result.durationMs} ms`);
        }),
    ));

  test('the answer is read up to 1 KiB only, and error statuses are answers', () =>
    withServer(
      (req, res) => {
        res.writeHead(req.url === '/euro' ? 200 : 500, { 'content-type': 'text/plain' });
        // 3 MiB: far more than is read; the rest is dropped with the connection.
        res.end(req.url === '/euro' ? '€'.repeat(1000) : 'x'.repeat(3 * 1024 * 1024));
      },
      (server) =>
        withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
          const big = answered(await postJson(dispatcher, `${server.url}/big`, '{}'));
          assert.equal(big.status, 500);
          assert.equal(big.body, 'x'.repeat(1024));
          // 1024 bytes hold 341 three-byte characters and one byte of the next, which is dropped.
          const euro = answered(await postJson(dispatcher, `${server.url}/euro`, '{}'));
          assert.equal(euro.body, '€'.repeat(341));
        }),
    ));

  test('an answer over 1 KiB that arrives whole leaves its connection for the next attempt; 1 KiB exactly is read whole', () =>
    withServer(
      (req, res) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(req.url === '/exact' ? 'y'.repeat(1024) : 'x'.repeat(2048));
      },
      (server) =>
        withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
          for (let attempt = 0; attempt < 5; attempt++) {
            assert.equal(answered(await postJson(dispatcher, server.url, '{}')).body, 'x'.repeat(1024));
          }
          assert.equal(answered(await postJson(dispatcher, `${server.url}/exact`, '{}')).body, 'y'.repeat(1024));
          // An error page longer than what is kept does not cost a new connection on every retry. (A
          // new connection's first answer may come in two reads, its head before its body: that one
          // is dropped, having more to come when the prefix was read.)
          assert.ok(server.connections <= 2, `${server.connections} connections for 6 attempts`);
        }),
    ));

  test('a header that cannot be sent is an invalid_request failure, not an exception', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
        const result = failed(await postJson(dispatcher, server.url, '{}', { 'x-bad': 'line\nbreak' }));
        assert.equal(result.reason, 'invalid_request');
        assert.equal(server.requests.length, 0);
      }),
    ));

  test('an attempt leaves no timer behind once answered', () =>
    withServer(ok, (server) =>
      withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
        const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
        await postJson(dispatcher, server.url, '{}');
        const before = timers();
        for (let attempt = 0; attempt < 50; attempt++) answered(await postJson(dispatcher, server.url, '{}'));
        // Each attempt's deadline is cleared with its answer: fifty attempts do not leave fifty timers.
        assert.ok(timers() - before < 5, `${timers() - before} more timers`);
      }),
    ));

  test('a refused connection, a name that does not resolve, a non-http URL: typed failures', async () => {
    const closed = await startHttpServer(ok);
    await closed.close(); // its port now has no listener
    await withDispatcher(configWith(LOOPBACK_ALLOWED), async (dispatcher) => {
      assert.equal(failed(await postJson(dispatcher, closed.url, '{}')).reason, 'connection_failed');
      const missing = failed(await postJson(dispatcher, 'http://missing.hooks.test/', '{}'));
      assert.equal(missing.reason, 'dns_failed');
      assert.match(missing.message, /missing\.hooks\.test does not resolve/);
      assert.equal(failed(await postJson(dispatcher, 'ftp://127.0.0.1/', '{}')).reason, 'invalid_request');
    });
  });

  test('connections to one origin are bounded', async () => {
    let inFlight = 0;
    let most = 0;
    await withServer(
      (_req, res) => {
        most = Math.max(most, ++inFlight);
        setTimeout(() => {
          inFlight--;
          res.writeHead(200);
          res.end('ok');
        }, 100);
      },
      (server) =>
        withDispatcher(
          configWith(LOOPBACK_ALLOWED),
          async (dispatcher) => {
            const results = await Promise.all(Array.from({ length: 6 }, () => postJson(dispatcher, server.url, '{}')));
            assert.deepEqual(
              results.map((result) => answered(result).status),
              [200, 200, 200, 200, 200, 200],
            );
            assert.equal(most, 2);
            assert.equal(server.connections, 2);
          },
          { connectionsPerOrigin: 2 },
        ),
    );
  });

  test('the observer records every TCP connection (so the loopback-only check above means something)', () => {
    assert.ok(connectedTo.every((address) => isIP(address) !== 0));
  });
});
