import { Socket } from 'node:net';
import { returnPathDomainOf, type AddFinding, type DoctorContext, type DomainRow } from './findings.ts';

// The MX records that must lead to Mailroom's inbound listener: the return path's (bounces, complaints and
// DMARC reports come back there) and, for a domain that receives mail, the domain's own. Checked by
// connecting to the first MX host and reading its greeting.

/** The return_path_mx finding, and receiving_mx for a receiving domain. */
export async function checkMx(ctx: DoctorContext, domain: DomainRow, add: AddFinding): Promise<void> {
  const returnPathDomain = returnPathDomainOf(ctx, domain);
  // The return path's MX reaches the inbound listener (bounces, complaints, DMARC reports).
  if (returnPathDomain === undefined) {
    add(
      'return_path_mx',
      domain.name,
      'warn',
      'no return-path domain: later bounces, complaints and DMARC reports are not seen',
      'Set MAILROOM_RETURN_PATH_DOMAIN and MAILROOM_INBOUND_PORT (docs/bounces.md).',
    );
  } else {
    const rp = returnPathDomain;
    const reached = await reachesListener(ctx, rp);
    if (reached === true) add('return_path_mx', rp, 'pass', `the MX of ${rp} answers as Mailroom's inbound listener`);
    else
      add(
        'return_path_mx',
        rp,
        'fail',
        `the MX of ${rp} does not reach Mailroom's inbound listener: ${reached}`,
        `Point the MX of ${rp} at the host running the listener (MAILROOM_INBOUND_PORT, port 25) and open port 25 to it.`,
      );
  }

  // A receiving domain's mail reaches Mailroom only when its best MX is the inbound listener.
  if (domain.receiving) {
    const reached = await reachesListener(ctx, domain.name);
    if (reached === true) {
      add('receiving_mx', domain.name, 'pass', `the MX of ${domain.name} answers as Mailroom's inbound listener`);
    } else
      add(
        'receiving_mx',
        domain.name,
        'fail',
        `receiving is enabled, but the MX of ${domain.name} does not reach Mailroom's inbound listener: ${reached}`,
        `Point the MX of ${domain.name} (priority 10, and no other MX before it) at the host running the listener (port 25), or disable receiving.`,
      );
  }
}

/** True when the return-path domain's first MX host greets as Mailroom's inbound listener; else why not. */
async function reachesListener(ctx: DoctorContext, domain: string): Promise<true | string> {
  let hosts: Array<{ exchange: string; priority: number }>;
  try {
    hosts = (await ctx.resolver.resolveMx(domain)).sort((a, b) => a.priority - b.priority);
  } catch (error) {
    return `its MX look-up failed (${(error as NodeJS.ErrnoException).code})`;
  }
  if (hosts.length === 0) return 'it has no MX record';
  const host = hosts[0]!.exchange;
  const addresses = await ctx.resolver.resolve4(host).catch(() => [] as string[]);
  if (addresses.length === 0) return `its MX host ${host} has no address`;
  const banner = await new Promise<string>((resolve) => {
    const socket = new Socket();
    const done = (text: string) => {
      socket.destroy();
      resolve(text);
    };
    socket.setTimeout(Math.min(ctx.config.smtpTimeoutMs, 10_000), () => done('no greeting'));
    socket.once('error', (error) => done(`no connection (${(error as NodeJS.ErrnoException).code ?? error.message})`));
    socket.once('data', (chunk) => done(chunk.toString('utf8').split('\r\n')[0] ?? ''));
    socket.connect(ctx.config.mxPort, addresses[0]!);
  });
  return /^220 .*Mailroom/.test(banner) ? true : `${host} [${addresses[0]}] answered "${banner.slice(0, 120)}"`;
}
