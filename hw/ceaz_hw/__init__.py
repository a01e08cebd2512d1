"""ceaz's compressor pipeline in Amaranth HDL, bit-exact with the `ceaz` reference codec."""
