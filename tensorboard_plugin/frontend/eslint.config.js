// The dashboard's sources: ESLint's recommended rules, in the browser, as ES modules (esbuild bundles them).
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["src/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
  },
];
