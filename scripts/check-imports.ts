// The import rules of the source tree, checked by `npm run check` (madge reads the imports):
//   1. no import cycle between files;
//   2. no import cycle between the folders of src/ (each folder directly under src/ is one domain, or
//      platform/; the files at src/'s top, the composition root, count as one folder);
//   3. src/platform/ imports nothing outside src/platform/;
//   4. no import cycle between the dashboard's files (web/src/: pages take their props' type from the
//      router, not from the route table that imports every page).
import path from 'node:path';
import madge from 'madge';

const root = path.resolve(import.meta.dirname, '..');
const result = await madge(path.join(root, 'src'), {
  baseDir: root,
  fileExtensions: ['ts'],
  detectiveOptions: { ts: { skipTypeImports: false } },
});
const graph = result.obj();
const problems: string[] = [];

for (const circle of result.circular()) problems.push(`file cycle: ${[...circle, circle[0]].join(' -> ')}`);

const web = await madge(path.join(root, 'web', 'src'), {
  baseDir: root,
  fileExtensions: ['ts', 'tsx'],
  detectiveOptions: { ts: { skipTypeImports: false }, tsx: { skipTypeImports: false } },
});
for (const circle of web.circular()) problems.push(`file cycle: ${[...circle, circle[0]].join(' -> ')}`);

/** src/emails/timeline.ts -> emails; src/app.ts -> (root) */
const folderOf = (file: string) => {
  const parts = path.relative('src', file).split(path.sep);
  return parts.length > 1 ? parts[0]! : '(root)';
};

const folderEdges = new Map<string, Map<string, string>>(); // from -> to -> one file import that makes the edge
for (const [file, imports] of Object.entries(graph)) {
  for (const imported of imports) {
    const from = folderOf(file);
    const to = folderOf(imported);
    if (from === 'platform' && to !== 'platform') problems.push(`platform imports outside it: ${file} -> ${imported}`);
    if (from === to) continue;
    if (!folderEdges.has(from)) folderEdges.set(from, new Map());
    if (!folderEdges.get(from)!.has(to)) folderEdges.get(from)!.set(to, `${file} -> ${imported}`);
  }
}

// Folder cycles: a depth-first search that reports each back edge with the path it closes.
const state = new Map<string, 'open' | 'done'>();
const trail: string[] = [];
const visit = (folder: string) => {
  state.set(folder, 'open');
  trail.push(folder);
  for (const [next, example] of folderEdges.get(folder) ?? []) {
    if (state.get(next) === 'open') {
      const circle = [...trail.slice(trail.indexOf(next)), next];
      problems.push(`folder cycle: ${circle.join(' -> ')} (closed by ${example})`);
    } else if (!state.has(next)) visit(next);
  }
  trail.pop();
  state.set(folder, 'done');
};
for (const folder of [...folderEdges.keys()].sort()) if (!state.has(folder)) visit(folder);

if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n${problems.length} import rule(s) broken\n`);
  process.exit(1);
}
process.stdout.write(
  `imports: ${Object.keys(graph).length} files, no cycle between files or folders, platform/ stands alone; ` +
    `web/src: ${Object.keys(web.obj()).length} files, no cycle\n`,
);
