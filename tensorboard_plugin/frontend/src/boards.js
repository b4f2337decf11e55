// Which board each run ran on, for the cross-run view of runs on several
// boards: a line per board and model, and a table of each line's best batch
// size. A run's board is named by its report's device: the board type it ran
// on (a fleet sweep's Ray resource), else the board's model name, else its
// host; a replay's power is the replayed log's, so its board is that host and
// the log ("vm, replay of tx2.log"). A run that records none is on a board of
// its own, never another's. Runs of one board keep one line per model and no table.
import { el, fmt, NOT_MEASURED } from "./format.js";
import { naturalCompare, sortableTable } from "./runs.js";

const UNKNOWN_BOARD = "(board not recorded)";
const NO_SUCCESS = "no successful configuration on this board";
const finite = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
const succeeded = (r) => r.summary.success !== false;

/** The run's board: device.board_type, else device.board or device.hostname (with the log a replay
 * played: "vm, replay of tx2.log"); null when none is recorded. */
export function boardOf(run) {
  const device = run.summary.device || {};
  if (device.board_type) return device.board_type;
  const host = device.board || device.hostname || null;
  const replay = device.replay_of ? `replay of ${String(device.replay_of).split(/[\\/]/).pop()}` : null;
  return host && replay ? `${host}, ${replay}` : host ?? replay;
}

const boardName = (r) => boardOf(r) ?? UNKNOWN_BOARD;

/** The distinct boards of the runs in natural order, "(board not recorded)" among them where a run records none. */
export const boardsOf = (runs) => [...new Set(runs.map(boardName))].sort(naturalCompare);

const modelOf = (r) => r.summary.model ?? "(no model)";

/** The line of a run where several boards ran: "cnn on orin-nano". */
export const boardAndModel = (r) => `${modelOf(r)} on ${boardName(r)}`;

/** Of ``get`` over the runs that succeeded and have a value: {mean, n, min, max, runs}; null where none has. */
export function successStats(runs, get) {
  const counted = runs.filter((r) => succeeded(r) && finite(get(r.summary)) !== null);
  const values = counted.map((r) => get(r.summary));
  if (!values.length) return null;
  return { mean: values.reduce((a, b) => a + b, 0) / values.length, n: values.length,
    min: Math.min(...values), max: Math.max(...values), runs: counted };
}

// The batch size whose mean is highest (or lowest), as "batch 4: 248 samples/s";
// a tie goes to the smaller batch size.
function best(runs, get, unit, highest) {
  if (!runs.some(succeeded)) return NO_SUCCESS;
  const sizes = [...new Set(runs.map((r) => r.summary.batch_size))].sort((a, b) => a - b);
  let pick = null;
  for (const size of sizes) {
    const v = successStats(runs.filter((r) => r.summary.batch_size === size), get)?.mean ?? null;
    if (v !== null && (pick === null || (highest ? v > pick.v : v < pick.v))) pick = { size, v };
  }
  return pick ? `batch ${pick.size}: ${fmt(pick.v, unit)}` : NOT_MEASURED;
}

const COLUMNS = [
  ["board", (row) => row.board],
  ["model", (row) => row.model],
  ["most samples/s", (row) => best(row.runs, (s) => s.samples_per_s, "samples/s", true)],
  ["fewest J/sample", (row) => best(row.runs, (s) => s.energy_per_sample_j, "J/sample", false)],
].map(([title, get]) => ({ title, get }));

/** Per board and model, the best batch size for samples/s and for J/sample; null for runs of one board. */
export function bestBatchTable(runs) {
  if (boardsOf(runs).length < 2) return null;
  const keys = [...new Set(runs.map((r) => JSON.stringify([boardName(r), modelOf(r)])))];
  const rows = keys.map((k) => JSON.parse(k)).sort((a, b) => naturalCompare(a[0], b[0]) || naturalCompare(a[1], b[1]))
    .map(([board, model]) => ({ board, model,
      runs: runs.filter((r) => boardName(r) === board && modelOf(r) === model) }));
  return el("div", { class: "best-batch" }, el("h4", { text: "Best batch size per board" }),
    el("p", { class: "note", text: "Among the successful runs (the mean where a batch size ran more than once): the most samples/s and the fewest joules per sample." }),
    sortableTable(COLUMNS, rows, { attrs: { id: "best-batch" } }));
}
