// Traffic shaping: the recipient sites and their pauses, and the sending sources with their warm-up.
import { loadShapingFile, type ShapingPolicy } from '../../shaping/shaping-file.ts';
import { listPools, listSources } from '../../shaping/sources.ts';
import { listDestinations, pauseSite, resumeSite } from '../../shaping/destinations.ts';
import { parseDuration } from '../../shaping/limits.ts';
import { normalizeSiteId } from '../../shaping/sites.ts';
import { listing, text, UsageError, type Command } from '../command.ts';

const site = { name: 'SITE', help: 'a recipient site (e.g. gmail.com) or relay' };
const source = {
  type: 'string',
  help: 'only this sending source (default: every source whose connections meet the site)',
} as const;

/** The sources a pause of `site` applies to: the one named, or every source whose connections meet the site. */
function sourcesAt(policy: ShapingPolicy, site: string, named: string | undefined): string[] {
  const { sources } = policy.egress;
  if (named !== undefined) {
    const source = sources.get(named);
    if (!source) throw new UsageError(`no source ${named} (sources: ${[...sources.keys()].join(', ')})`);
    // A relay source meets every site through the relay: its one site is `relay`.
    if (policy.egress.declared && (source.kind === 'relay') !== (site === 'relay')) {
      throw new UsageError(
        source.kind === 'relay'
          ? `source ${named} is a relay: its connections count against the site relay, not ${site}`
          : `source ${named} sends from an address: it has no connections to the site relay`,
      );
    }
    return [named];
  }
  // A relay source's connections all count against the site `relay`; an address source's against the site itself.
  return [...sources.values()]
    .filter((source) => (source.kind === 'relay') === (site === 'relay') || !policy.egress.declared)
    .map((source) => source.name);
}

export const shapingCommands: Record<string, Command> = {
  'destinations list': {
    usage: 'destinations list',
    description: 'list the recipient sites: connections, queued messages, pauses',
    options: {},
    async run({ config, withDatabase }) {
      const policy = loadShapingFile(config.shapingFile);
      const data = await withDatabase((db) => listDestinations(db, policy, new Date()));
      return {
        json: { data },
        text: listing(
          data,
          (d) =>
            `${d.site}  ${d.connections}/${d.limits.connection_limit} connections, ${d.queued} queued` +
            (d.paused_until ? `, paused until ${d.paused_until} (${d.pause_reason}: ${d.pause_reply ?? ''})` : ''),
        ),
      };
    },
  },

  'destinations pause': {
    usage: 'destinations pause SITE [--for 30m] [--source S]',
    description: 'stop delivering to a recipient site for a while',
    options: {
      for: { type: 'string', default: '1h', help: 'how long, a duration such as 30m, 2h or 1d' },
      source,
    },
    positionals: [site],
    async run({ config, values, positionals, withDatabase }) {
      const forMs = parseDuration(text(values, 'for'));
      if (forMs === undefined) throw new UsageError('--for is a duration such as 30m, 2h or 1d');
      const policy = loadShapingFile(config.shapingFile);
      const now = new Date();
      const until = new Date(now.getTime() + forMs);
      const site = normalizeSiteId(positionals[0]!);
      const sources = sourcesAt(policy, site, values.source as string | undefined);
      await withDatabase(async (db) => {
        for (const source of sources)
          await pauseSite(db, policy, { source, site }, until, now, 'paused by the operator');
      });
      const json = { site, sources, paused_until: until.toISOString() };
      return { json, text: `${site} paused until ${json.paused_until} (${sources.join(', ')})` };
    },
  },

  'destinations resume': {
    usage: 'destinations resume SITE [--source S]',
    description: 'deliver to a paused recipient site again',
    options: { source },
    positionals: [site],
    async run({ config, values, positionals, withDatabase }) {
      const policy = loadShapingFile(config.shapingFile);
      const site = normalizeSiteId(positionals[0]!);
      const sources = sourcesAt(policy, site, values.source as string | undefined);
      await withDatabase(async (db) => {
        for (const source of sources) await resumeSite(db, policy, { source, site }, new Date());
      });
      return { json: { site, sources, paused_until: null }, text: `${site} resumed (${sources.join(', ')})` };
    },
  },

  'sources list': {
    usage: 'sources list',
    description: "list the sending sources and pools, with each source's warm-up",
    options: {},
    async run({ config, withDatabase }) {
      const { egress } = loadShapingFile(config.shapingFile);
      const data = await withDatabase((db) => listSources(db, egress, new Date()));
      return {
        json: { data, pools: listPools(egress) },
        text: listing(data, (source) => {
          const where = source.kind === 'relay' ? `relay ${source.relay}` : (source.address ?? 'the host address');
          const warmup = source.warmup.map((w) =>
            w.warm
              ? `${w.site} warm`
              : `${w.site} stage ${w.stage}/${w.stages}: ${w.sent_today} of ${w.allowance_today} today`,
          );
          return [
            `${source.name}  ${where}  pools: ${source.pools.join(', ')}`,
            ...warmup.map((line) => `  ${line}`),
          ].join('\n');
        }),
      };
    },
  },
};
