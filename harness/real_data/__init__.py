"""Public real data -> tapes (``docs/tapes.md``), for backtests on real markets.

- ``klines``: Binance 1-second klines (zip or csv) as the price at each whole second;
- ``binance``: a tape where those prices are the Chainlink spot on RTDS (arriving 1.4 s after
  their stamp), with each window's Gamma answer, placeholder books and, optionally, the
  official outcomes (``read_official``: polymarket_btc_5m_enriched.csv);
- ``cronos``: the CLOB books of CronosVirus00/polymarket-BTC5min-database (parquet, needs
  pyarrow) as received, and the market's own mid at each checkpoint;
- ``files``: finding the data in a folder, writing hourly tape files.

``python -m harness.real_data`` is the command line; ``bench/real.py`` replays and scores.
None of the data is in this repository: IGOLz/polyedge-v2 (the klines) has no license.
"""
