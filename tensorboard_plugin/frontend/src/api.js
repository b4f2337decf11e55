// Routes of the MobilePerf plugin, relative to where TensorBoard serves this module.
const BASE = new URL(".", import.meta.url);

async function getJson(route, params = {}) {
  const url = new URL(route, BASE);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${route}: HTTP ${response.status}`);
  return body;
}

export const listRuns = () => getJson("runs");
export const getSteps = (run) => getJson("steps", { run });
export const getChannels = (run) => getJson("channels", { run });
export const getSeries = (run, channel, maxPoints) => getJson("series", { run, channel, max_points: maxPoints });
export const getCrossrun = (quantity, grouping) => getJson("crossrun", { ...(quantity ? { quantity } : {}), ...(grouping ? { grouping } : {}) });
