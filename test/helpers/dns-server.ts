import dns2, { type DnsHandler } from 'dns2';

// A real DNS server on loopback answering from a zone the test edits. UDP, plus TCP on the same port
// for answers too long for UDP (the resolver retries over TCP then). A name missing from the zone is
// NXDOMAIN; a name present without records of the asked type answers NOERROR with no data.

export interface ZoneEntry {
  mx?: { priority: number; exchange: string }[];
  a?: string[];
  aaaa?: string[];
  /** Each record as its character-strings (long values split in 255-octet chunks). */
  txt?: string[][];
  /** Host names, for a reverse name (`2.0.0.127.in-addr.arpa`). */
  ptr?: string[];
  /** The canonical name, answered to CNAME questions only (no chasing: enough for record checks). */
  cname?: string;
  /** The TTL of every record of the name, in seconds (60 when absent). */
  ttl?: number;
  /** An SOA in the authority section of an answer without records (its negative TTL, RFC 2308). */
  soa?: { ttl: number; minimum: number };
}

/** 'servfail' answers SERVFAIL; 'silent' never answers, so the resolver times out. */
export type Zone = Map<string, ZoneEntry | 'servfail' | 'silent'>;

export interface DnsServer {
  /** `127.0.0.1:<port>`, for MAILROOM_DNS_SERVERS. */
  address: string;
  zone: Zone;
  close(): Promise<void>;
}

const { Packet } = dns2;
// Response codes (RFC 1035 §4.1.1); dns2 has them at runtime but not in its types.
const RCODE = { SERVFAIL: 2, NXDOMAIN: 3 };

export async function startDnsServer(zone: Zone = new Map()): Promise<DnsServer> {
  const handle: DnsHandler = (request, send) => {
    const response = Packet.createResponseFromRequest(request);
    const question = request.questions[0]!;
    const entry = zone.get(question.name.toLowerCase()); // resolvers may randomise case (DNS 0x20)
    if (entry === 'silent') return;
    if (entry === 'servfail') response.header.rcode = RCODE.SERVFAIL;
    else if (entry === undefined) response.header.rcode = RCODE.NXDOMAIN;
    else {
      const answer = (data: Record<string, unknown>) =>
        response.answers.push(
          Packet.createResourceFromQuestion(question, {
            type: question.type,
            class: Packet.CLASS.IN,
            ttl: entry.ttl ?? 60,
            ...data,
          }),
        );
      if (question.type === Packet.TYPE.MX)
        entry.mx?.forEach(({ priority, exchange }) => answer({ priority, exchange }));
      if (question.type === Packet.TYPE.A) entry.a?.forEach((address) => answer({ address }));
      if (question.type === Packet.TYPE.AAAA) entry.aaaa?.forEach((address) => answer({ address }));
      if (question.type === Packet.TYPE.TXT) entry.txt?.forEach((data) => answer({ data }));
      if (question.type === Packet.TYPE.PTR) entry.ptr?.forEach((domain) => answer({ domain }));
      if (question.type === Packet.TYPE.CNAME && entry.cname !== undefined) answer({ domain: entry.cname });
      if (response.answers.length === 0 && entry.soa) {
        response.authorities.push({
          name: question.name,
          type: Packet.TYPE.SOA,
          class: Packet.CLASS.IN,
          ttl: entry.soa.ttl,
          primary: 'ns.test',
          admin: 'hostmaster.test',
          serial: 1,
          refresh: 3600,
          retry: 600,
          expiration: 86_400,
          minimum: entry.soa.minimum,
        } as never);
      }
    }
    send(response);
  };
  for (let attempt = 0; ; attempt++) {
    const udp = dns2.createServer({ udp: true, handle });
    const { udp: bound } = await udp.listen({ udp: { port: 0, address: '127.0.0.1' } });
    const port = bound!.port;
    const tcp = dns2.createServer({ tcp: true, handle });
    const listening = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen({ tcp: { port, address: '127.0.0.1' } }).then(
        () => resolve(true),
        () => resolve(false),
      );
    });
    if (listening) {
      return {
        address: `127.0.0.1:${port}`,
        zone,
        close: async () => void (await Promise.all([udp.close(), tcp.close()])),
      };
    }
    await udp.close();
    if (attempt === 5) throw new Error('no port free for both UDP and TCP');
  }
}
