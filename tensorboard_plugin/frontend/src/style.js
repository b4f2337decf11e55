// The tab's own styles (uPlot's come from its package), one rule a line.
export const STYLE = [
  "body { font-family: Roboto, \"Helvetica Neue\", sans-serif; font-size: 13px; margin: 16px; color: #212121; background: #fff; }",
  "@media (prefers-color-scheme: dark) { body { color: #e0e0e0; background: #303030; } th { background: #424242 !important; } }",
  "h2 { font-size: 18px; font-weight: 500; } h3 { font-size: 15px; font-weight: 500; margin: 24px 0 8px; } h4 { font-size: 13px; font-weight: 500; margin: 8px 0; }",
  "table { border-collapse: collapse; margin: 8px 0; } th, td { padding: 4px 10px; border-bottom: 1px solid rgba(128,128,128,0.3); text-align: right; }",
  "th { cursor: pointer; background: #f5f5f5; user-select: none; } td:first-child, th:first-child, td:nth-child(2) { text-align: left; }",
  ".runs label { margin-right: 16px; } .header { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 6px 0; }",
  ".header span b { font-weight: 500; } .failed { color: #c62828; } .busy { color: #e65100; } .ok { color: #2e7d32; }",
  ".chart { margin: 8px 0 16px; } .empty p { color: #757575; font-style: italic; } .note { color: #757575; }",
  ".error { color: #c62828; } .scroll { overflow-x: auto; max-height: 420px; } .step-table td, .step-table th { white-space: nowrap; }",
  ".step-table tr.failed td { color: #c62828; } .step-table tr.warm-up td { color: #757575; }",
  ".swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }",
  ".header span[title] b { text-decoration: underline dotted; cursor: help; } a.csv { display: inline-block; margin: 4px 0; } .crossrun select { margin: 0 4px; }",
].join("\n");
