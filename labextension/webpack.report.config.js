// The travelling report's script (src/report.ts): the run renderer and its styles in one file,
// with no JupyterLab, for memfit_jupyter/jupyter/report.py to inline into an offline HTML page.
const path = require('path');

module.exports = {
  mode: 'production',
  entry: './lib/report.js',
  output: {
    path: path.resolve(__dirname, '../memfit_jupyter/report_static'),
    filename: 'memfit-report.js'
  },
  module: { rules: [{ test: /\.css$/, use: ['style-loader', 'css-loader'] }] },
  optimization: { splitChunks: false },
  devtool: false,
  performance: { hints: false }
};
