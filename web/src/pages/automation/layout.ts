// The drawing of an automation's graph, laid out by this file alone (no graph library): steps are boxes
// in rows by their depth from the trigger, top to bottom, and connections are curves between them.
//
// - Depth is the longest path from the trigger over the connections that go forward, so every forward
//   connection points down. A connection that closes a loop (back to a step on the path that reached
//   it) is drawn up the right-hand side instead.
// - Steps the trigger does not reach are put in rows under all the others.
// - Within a row, steps are ordered by the mean position of the steps that lead to them (the first row
//   in the order of the automation's steps), which keeps most connections from crossing.

export interface GraphStepInput {
  key: string;
}

export interface GraphConnectionInput {
  from: string;
  to: string;
  type?: string;
}

export interface PlacedStep {
  key: string;
  /** 0 for the trigger; each row down is one more. */
  depth: number;
  /** Whether a path of connections from the trigger reaches it. */
  reachable: boolean;
  x: number;
  y: number;
}

export interface PlacedConnection {
  from: string;
  to: string;
  type: string;
  /** An SVG path (`d`) from the source box to the target box. */
  path: string;
  /** Where its label goes: the middle of the curve. */
  labelX: number;
  labelY: number;
  /** True when it goes back up (a loop): drawn along the right-hand side. */
  back: boolean;
}

export interface GraphLayout {
  steps: PlacedStep[];
  connections: PlacedConnection[];
  width: number;
  height: number;
}

export const BOX_WIDTH = 216;
export const BOX_HEIGHT = 116;
const GAP_X = 48;
const GAP_Y = 72;
const MARGIN = 16;
/** Room on the right for connections that go back up. */
const BACK_LANE = 28;
/** The distance between connections leaving (or entering) one box side by side. */
const PORT_SPREAD = 28;

/** The middle of a cubic Bézier curve, for its label. */
function middle(points: Array<[number, number]>): [number, number] {
  const [p0, p1, p2, p3] = points as [[number, number], [number, number], [number, number], [number, number]];
  return [(p0[0] + 3 * p1[0] + 3 * p2[0] + p3[0]) / 8, (p0[1] + 3 * p1[1] + 3 * p2[1] + p3[1]) / 8];
}

const curve = (points: Array<[number, number]>) =>
  `M ${points[0]![0]} ${points[0]![1]} C ${points
    .slice(1)
    .map(([x, y]) => `${x} ${y}`)
    .join(', ')}`;

/** Offsets for `count` ports side by side, centred on 0. */
const spread = (index: number, count: number) => (index - (count - 1) / 2) * PORT_SPREAD;

export function layoutGraph(
  steps: GraphStepInput[],
  connections: GraphConnectionInput[],
  isRoot: (step: GraphStepInput) => boolean,
): GraphLayout {
  const keys = steps.map((step) => step.key);
  const order = new Map(keys.map((key, index) => [key, index]));
  const edges = connections.filter((edge) => order.has(edge.from) && order.has(edge.to));
  const outgoing = new Map<string, GraphConnectionInput[]>(keys.map((key) => [key, []]));
  for (const edge of edges) outgoing.get(edge.from)!.push(edge);

  let roots = steps.filter(isRoot).map((step) => step.key);
  if (roots.length === 0) {
    const entered = new Set(edges.map((edge) => edge.to));
    roots = keys.filter((key) => !entered.has(key)).slice(0, 1);
    if (roots.length === 0 && keys[0] !== undefined) roots = [keys[0]];
  }

  // Depth-first from the roots, then from each step not yet seen: a connection to a step still on the
  // path is a back connection (it closes a loop).
  const back = new Set<GraphConnectionInput>();
  const state = new Map<string, 'open' | 'done'>();
  const reachable = new Set<string>();
  const visit = (start: string, fromRoot: boolean) => {
    const stack: Array<{ key: string; next: number }> = [{ key: start, next: 0 }];
    state.set(start, 'open');
    if (fromRoot) reachable.add(start);
    while (stack.length > 0) {
      const top = stack.at(-1)!;
      const out = outgoing.get(top.key)!;
      if (top.next >= out.length) {
        state.set(top.key, 'done');
        stack.pop();
        continue;
      }
      const edge = out[top.next++]!;
      const seen = state.get(edge.to);
      if (seen === 'open') back.add(edge);
      else if (seen === undefined) {
        state.set(edge.to, 'open');
        if (fromRoot) reachable.add(edge.to);
        stack.push({ key: edge.to, next: 0 });
      }
    }
  };
  for (const root of roots) if (!state.has(root)) visit(root, true);
  for (const key of keys) if (!state.has(key)) visit(key, false);

  // Longest path over the forward connections (a DAG once back connections are left out), reachable
  // steps first; the rest start in the row under the deepest reachable one.
  const forward = edges.filter((edge) => !back.has(edge));
  const depth = new Map<string, number>();
  const layer = (members: string[], base: number) => {
    const inside = new Set(members);
    const local = forward.filter((edge) => inside.has(edge.from) && inside.has(edge.to));
    const incoming = new Map(members.map((key) => [key, 0]));
    for (const edge of local) incoming.set(edge.to, incoming.get(edge.to)! + 1);
    const ready = members.filter((key) => incoming.get(key) === 0);
    for (const key of ready) depth.set(key, base);
    while (ready.length > 0) {
      const key = ready.shift()!;
      for (const edge of local) {
        if (edge.from !== key) continue;
        depth.set(edge.to, Math.max(depth.get(edge.to) ?? base, depth.get(key)! + 1));
        const left = incoming.get(edge.to)! - 1;
        incoming.set(edge.to, left);
        if (left === 0) ready.push(edge.to);
      }
    }
  };
  const reached = keys.filter((key) => reachable.has(key));
  layer(reached, 0);
  const deepest = Math.max(-1, ...reached.map((key) => depth.get(key) ?? 0));
  layer(
    keys.filter((key) => !reachable.has(key)),
    deepest + 1,
  );

  const rows: string[][] = [];
  for (const key of keys) {
    const row = depth.get(key) ?? 0;
    (rows[row] ??= []).push(key);
  }
  const column = new Map<string, number>();
  rows.forEach((row, index) => {
    if (index > 0) {
      const weight = (key: string) => {
        const from = forward.filter((edge) => edge.to === key && column.has(edge.from));
        if (from.length === 0) return Number.POSITIVE_INFINITY;
        return from.reduce((sum, edge) => sum + column.get(edge.from)!, 0) / from.length;
      };
      const weights = new Map(row.map((key) => [key, weight(key)]));
      row.sort((a, b) => weights.get(a)! - weights.get(b)! || order.get(a)! - order.get(b)!);
    }
    // Positions in box widths, each row centred on the widest one's middle.
    row.forEach((key, position) => column.set(key, position - (row.length - 1) / 2));
  });

  const widest = Math.max(1, ...rows.map((row) => row?.length ?? 0));
  const contentWidth = widest * BOX_WIDTH + (widest - 1) * GAP_X;
  const height = MARGIN * 2 + rows.length * BOX_HEIGHT + Math.max(0, rows.length - 1) * GAP_Y;
  const placed = new Map<string, PlacedStep>();
  for (const key of keys) {
    const row = depth.get(key) ?? 0;
    placed.set(key, {
      key,
      depth: row,
      reachable: reachable.has(key),
      x: MARGIN + contentWidth / 2 + column.get(key)! * (BOX_WIDTH + GAP_X) - BOX_WIDTH / 2,
      y: MARGIN + row * (BOX_HEIGHT + GAP_Y),
    });
  }

  // Ports: a box's downward connections leave its bottom side by side in the order of their targets,
  // and arrive at the top of their targets side by side in the order of their sources.
  const downward = edges.filter((edge) => !back.has(edge) && placed.get(edge.to)!.y > placed.get(edge.from)!.y);
  const leaving = new Map<string, GraphConnectionInput[]>();
  const arriving = new Map<string, GraphConnectionInput[]>();
  for (const edge of downward) {
    (leaving.get(edge.from) ?? leaving.set(edge.from, []).get(edge.from)!).push(edge);
    (arriving.get(edge.to) ?? arriving.set(edge.to, []).get(edge.to)!).push(edge);
  }
  const upward = edges.length - downward.length;
  const width = MARGIN * 2 + contentWidth + (upward > 0 ? BACK_LANE * (upward + 1) : 0);
  for (const list of leaving.values()) list.sort((a, b) => placed.get(a.to)!.x - placed.get(b.to)!.x);
  for (const list of arriving.values()) list.sort((a, b) => placed.get(a.from)!.x - placed.get(b.from)!.x);

  let lane = 0;
  const placedConnections = edges.map((edge): PlacedConnection => {
    const from = placed.get(edge.from)!;
    const to = placed.get(edge.to)!;
    const type = edge.type ?? 'default';
    let points: Array<[number, number]>;
    const isDown = downward.includes(edge);
    if (isDown) {
      const out = leaving.get(edge.from)!;
      const into = arriving.get(edge.to)!;
      const sx = from.x + BOX_WIDTH / 2 + spread(out.indexOf(edge), out.length);
      const sy = from.y + BOX_HEIGHT;
      const tx = to.x + BOX_WIDTH / 2 + spread(into.indexOf(edge), into.length);
      const ty = to.y;
      const bend = Math.min(GAP_Y, (ty - sy) / 2);
      points = [
        [sx, sy],
        [sx, sy + bend],
        [tx, ty - bend],
        [tx, ty],
      ];
    } else {
      // Up the right-hand side, each such connection in a lane of its own.
      lane += 1;
      const laneX = MARGIN + contentWidth + BACK_LANE * lane;
      const sx = from.x + BOX_WIDTH;
      const sy = from.y + BOX_HEIGHT * 0.35;
      const tx = to.x + BOX_WIDTH;
      const ty = to.y + BOX_HEIGHT * 0.65;
      points = [
        [sx, sy],
        [Math.max(laneX, sx + BACK_LANE), sy],
        [Math.max(laneX, tx + BACK_LANE), ty],
        [tx, ty],
      ];
    }
    const [labelX, labelY] = middle(points);
    return { from: edge.from, to: edge.to, type, path: curve(points), labelX, labelY, back: !isDown };
  });

  return { steps: [...placed.values()], connections: placedConnections, width, height };
}
