// Is this tree slower than an earlier release? Runs the three benchmarks that guard the hot paths for a
// git revision and for the work tree, alternated in one run, and prints each ratio for both and this
// tree's ÷ the revision's:
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/compare.ts <revision>
//
// - accept:   bench/accept.ts, POST /emails accepted/s ÷ a bare Fastify route parsing the same body;
// - delivery: bench/delivery-vs-postfix.ts, delivered/s ÷ Postfix relaying the same messages to the same sink;
// - webhooks: bench/webhooks.ts, signed deliveries/s ÷ raw undici POSTs of the same bodies.
//
// Each side runs its own benchmark files on its own code: the revision is checked out in a temporary git
// worktree (its dependencies linked from this tree when its package-lock.json is the same, else installed
// there with `npm ci --ignore-scripts`), and removed at the end. ROUNDS (2) rounds; in each, every measure
// runs for both sides, the side that goes first changing every round, so that a machine getting busier or
// quieter during the run weighs on both. Absolute speed on a small machine varies twofold from hour to
// hour; a ratio to a baseline raced in the same run, compared within one run, does not.
//
// ACCEPT_SECONDS (5), DELIVERY_MESSAGES (2000) and WEBHOOK_EVENTS (10000) size each run. The verdict holds
// this tree to THRESHOLD (0.95) of the revision on every measure (the median of its rounds each); the exit
// status is 1 when a measure is below it.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

const revision = process.argv[2];
if (!revision || !process.env.DATABASE_URL) {
  console.error('usage: DATABASE_URL=postgres://… node bench/compare.ts <git revision>');
  process.exit(2);
}
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const THRESHOLD = Number(process.env.THRESHOLD ?? 0.95);
const here = path.resolve(import.meta.dirname, '..');

interface Measure {
  name: string;
  file: string;
  env: Record<string, string>;
  /** The ratio in the benchmark's output. */
  ratio: RegExp;
}

const ALL_MEASURES: Measure[] = [
  {
    name: 'accept',
    file: 'bench/accept.ts',
    // One round per run: compare's own ROUNDS must not reach accept.ts, which reads the same name.
    env: { DURATION: String(process.env.ACCEPT_SECONDS ?? 5), ROUNDS: '1' },
    // Older revisions print "ratio (Mailroom / bare): X", newer ones "ratio (Mailroom / bare), one round: X".
    ratio: /ratio \(Mailroom \/ bare\)[^:\n]*: ([\d.]+)/,
  },
  {
    name: 'delivery',
    file: 'bench/delivery-vs-postfix.ts',
    env: { MESSAGES: String(process.env.DELIVERY_MESSAGES ?? 2000) },
    ratio: /ratio \(Mailroom \/ Postfix\): ([\d.]+)/,
  },
  {
    name: 'webhooks',
    file: 'bench/webhooks.ts',
    // No warm-up round: a revision whose benchmark has none would be measured cold against a warm tree.
    env: { EVENTS: String(process.env.WEBHOOK_EVENTS ?? 10_000), ROUNDS: '1', WARMUP: '0' },
    ratio: /ratio \(Mailroom \/ raw\): median ([\d.]+)/,
  },
];

// MEASURES=accept,webhooks runs only those.
const chosen = process.env.MEASURES?.split(',').map((name) => name.trim());
const MEASURES = ALL_MEASURES.filter((m) => !chosen || chosen.includes(m.name));
if (MEASURES.length === 0) {
  console.error(`MEASURES names none of: ${ALL_MEASURES.map((m) => m.name).join(', ')}`);
  process.exit(2);
}

const git = (...args: string[]) => execFileSync('git', args, { cwd: here, encoding: 'utf8' }).trim();

/** The revision in a worktree of its own, ready to run its benchmarks. */
async function checkout(rev: string): Promise<{ dir: string; commit: string; remove(): Promise<void> }> {
  const commit = git('rev-parse', '--short', `${rev}^{commit}`);
  const dir = await mkdtemp(path.join(tmpdir(), `mailroom-compare-${commit}-`));
  git('worktree', 'add', '--detach', dir, commit);
  const lock = (root: string) => readFileSync(path.join(root, 'package-lock.json'), 'utf8');
  if (lock(dir) === lock(here)) symlinkSync(path.join(here, 'node_modules'), path.join(dir, 'node_modules'));
  else execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
  return {
    dir,
    commit,
    async remove() {
      git('worktree', 'remove', '--force', dir);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs one benchmark in `dir`, its output passed through; its ratio. */
function runBench(dir: string, measure: Measure): Promise<number> {
  if (!existsSync(path.join(dir, measure.file))) {
    throw new Error(`${dir} has no ${measure.file}: this revision cannot be compared on ${measure.name}`);
  }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [measure.file], {
      cwd: dir,
      env: { ...process.env, ...measure.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      process.stdout.write(chunk);
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      const found = measure.ratio.exec(output);
      if (code === 0 && found) resolve(Number(found[1]));
      else reject(new Error(`${measure.file} in ${dir} exited with ${code}${found ? '' : ', printing no ratio'}`));
    });
  });
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const previous = await checkout(revision);
const treeCommit = git('rev-parse', '--short', 'HEAD');
const treeName = `work tree (${treeCommit}${git('status', '--porcelain') ? ' + changes' : ''})`;
const sides = [
  { name: `${previous.commit}`, dir: previous.dir },
  { name: treeName, dir: here },
];
const ratios = new Map<string, number[][]>(MEASURES.map((m) => [m.name, [[], []]]));
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? [0, 1] : [1, 0];
    for (const measure of MEASURES) {
      for (const side of order) {
        console.log(`\n=== round ${round}/${ROUNDS}: ${measure.name}, ${sides[side]!.name}`);
        ratios.get(measure.name)![side]!.push(await runBench(sides[side]!.dir, measure));
      }
    }
  }
} finally {
  await previous.remove();
}

console.log(`\n${previous.commit} against the ${treeName}, ${ROUNDS} rounds alternated; ratio to each baseline:`);
let below = 0;
for (const measure of MEASURES) {
  const [before, after] = ratios.get(measure.name)!;
  const change = median(after!) / median(before!);
  if (change < THRESHOLD) below += 1;
  console.log(
    `  ${measure.name.padEnd(9)} ${previous.commit} ${before!.map((r) => r.toFixed(3)).join(' ')}   ` +
      `tree ${after!.map((r) => r.toFixed(3)).join(' ')}   tree ÷ ${previous.commit} ${change.toFixed(2)}` +
      (change < THRESHOLD ? `   BELOW ${THRESHOLD}` : ''),
  );
}
console.log(
  below === 0 ? `every measure ≥ ${THRESHOLD} of ${previous.commit}` : `${below} measure(s) below ${THRESHOLD}`,
);
process.exit(below === 0 ? 0 : 1);
